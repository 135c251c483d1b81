//! The object's own order between two facts about one object: which of them
//! is the later write. Every last-writer-wins structure of the index (exact,
//! latest, the sticky pointer, the rv hatch, the name tier, the collection
//! choice) keeps the fact that is last by this order rather than the one that
//! arrived last, because arrival order is not the object's order: the API
//! server re-delivers any batch it got no 2xx for, and a re-delivered older
//! batch must not make an older writer "latest" (a wrong author on a removal).
//!
//! The order: resourceVersion where both are integers (an etcd revision, so
//! comparable within one object), else the audit stageTimestamp. Only when
//! neither tells them apart does arrival decide (the newcomer is later),
//! which is what last-writer-wins always meant.

use std::cmp::Ordering;

use crate::attribution::Fact;

/// `Some(Greater)` when `a` is later than `b` in the object's own order,
/// `None` when neither the resourceVersion nor the stageTimestamp tells
/// them apart.
pub fn object_order(a: &Fact, b: &Fact) -> Option<Ordering> {
    if let (Ok(ra), Ok(rb)) = (a.resource_version.parse::<u64>(), b.resource_version.parse::<u64>())
        && ra != rb
    {
        return Some(ra.cmp(&rb));
    }
    match (stage_time_us(&a.stage_timestamp), stage_time_us(&b.stage_timestamp)) {
        (Some(ta), Some(tb)) if ta != tb => Some(ta.cmp(&tb)),
        _ => None,
    }
}

/// Whether `new` may replace `current` in a last-writer-wins slot: it is
/// later in the object's order, or the order cannot tell and it arrived later.
pub fn supersedes(new: &Fact, current: &Fact) -> bool {
    object_order(new, current).is_none_or(|o| o == Ordering::Greater)
}

/// An RFC 3339 timestamp (`2026-11-29T12:00:00.123456Z`, any fraction, `Z`
/// or `±hh:mm`) as microseconds since the epoch; `None` when it is not one.
pub fn stage_time_us(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let part = s.get(from..to)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 6 {
                micros = micros * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..6 {
            micros *= 10;
        }
    }
    let offset_s = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let (h, m) = (num(i + 1, i + 3)?, num(i + 4, i + 6)?);
            let off = h * 3600 + m * 60;
            if *sign == b'+' { off } else { -off }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Some(secs * 1_000_000 + micros)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(rv: &str, ts: &str) -> Fact {
        Fact { author: "a".into(), resource_version: rv.into(), stage_timestamp: ts.into(), ..Fact::default() }
    }

    #[test]
    fn timestamps_parse_to_microseconds() {
        assert_eq!(stage_time_us("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(stage_time_us("1970-01-01T00:00:01.5Z"), Some(1_500_000));
        assert_eq!(stage_time_us("1970-01-01T01:00:00.000001+01:00"), Some(1));
        assert_eq!(stage_time_us("2026-11-29T12:00:00.123456Z"), Some(1_795_953_600_123_456));
        // Nanoseconds are cut to microseconds.
        assert_eq!(stage_time_us("1970-01-01T00:00:00.123456789Z"), Some(123_456));
        for bad in
            ["", "yesterday", "2026-11-29", "2026-13-01T00:00:00Z", "2026-11-29T12:00:00", "2026-11-29T12:00:00.Z"]
        {
            assert_eq!(stage_time_us(bad), None, "{bad}");
        }
    }

    #[test]
    fn resource_version_decides_where_comparable_else_the_stage_timestamp() {
        let early = "2026-11-29T12:00:00.000001Z";
        let late = "2026-11-29T12:00:00.000002Z";
        // rv wins over a timestamp that says otherwise (the API servers' clocks may skew).
        assert_eq!(object_order(&fact("10", early), &fact("9", late)), Some(Ordering::Greater));
        // Equal rv (a finalizer patch carries the rv the deletion stamped): the timestamp.
        assert_eq!(object_order(&fact("10", late), &fact("10", early)), Some(Ordering::Greater));
        // An rv that is no integer is not comparable.
        assert_eq!(object_order(&fact("abc", early), &fact("9", late)), Some(Ordering::Less));
        assert_eq!(object_order(&fact("", ""), &fact("", "")), None);
        assert!(supersedes(&fact("", ""), &fact("", "")), "no order: the newcomer is later");
        assert!(!supersedes(&fact("5", early), &fact("6", early)));
        assert!(supersedes(&fact("6", early), &fact("5", late)));
    }
}
