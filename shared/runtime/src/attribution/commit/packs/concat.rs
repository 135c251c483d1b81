//! Merging packs by concatenation: the new pack is the old packs' entries
//! byte for byte, one after another, and its index is theirs merged. No
//! object is inflated, deltified or compressed again, so a merge costs what
//! copying its bytes does, in memory a byte per object, where libgit2's
//! pack builder (which cannot reuse deltas) searched every object for a
//! delta again and held them all (issue 31: a 300,000-object merge took
//! seconds of CPU and hundreds of MiB).
//!
//! An entry's offset delta points back into its own pack, and each old pack
//! lands in one piece, so those offsets stay true; a reference delta names
//! its base, which an on-disk pack holds itself. The formats are
//! gitformat-pack(5): pack version 2 or 3, index version 2, SHA-1.
//!
//! Packs that share an object are not concatenated (the index would list
//! it twice): the caller rebuilds those instead.

use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use sha1::{Digest, Sha1};

use super::{IDX_HEADER, IDX_MAGIC, LARGE_OFFSET as LARGE, OID_LEN, PackFile, idx_offset, named};
use crate::attribution::commit::{GitError as Error, Result};

const PACK_HEADER: u64 = 12;
const TRAILER: u64 = OID_LEN as u64;

/// One old pack, as the merge reads it.
struct Source {
    idx: PathBuf,
    pack: PathBuf,
    count: u64,
    fanout: [u32; 256],
    /// The index's 64-bit offsets, for entries past 2 GiB.
    large: Vec<u64>,
    /// Where its entries start in the new pack.
    base: u64,
    /// Its entries' bytes: the pack less header and trailer.
    entries: u64,
}

/// Writes one pack holding the entries of `packs` into `dir`, named as git
/// names packs (by the pack's checksum); returns its path without
/// extension, or `None` (and writes nothing) when two of them share an
/// object or one is not a pack this merge can copy.
pub(super) fn concatenate(dir: &Path, packs: &[&PackFile]) -> Result<Option<PathBuf>> {
    let Some(mut sources) = packs.iter().map(|p| source(p)).collect::<Result<Option<Vec<_>>>>()? else {
        return Ok(None);
    };
    if sources.len() > usize::from(u8::MAX) {
        return Ok(None);
    }
    let mut base = PACK_HEADER;
    for s in &mut sources {
        s.base = base;
        base += s.entries;
    }
    let total: u64 = sources.iter().map(|s| s.count).sum();
    let Ok(total32) = u32::try_from(total) else {
        return Ok(None);
    };
    // The index's order, as which old pack each entry comes from: their
    // own indexes are sorted, so a k-way merge, and the nth entry taken
    // from a pack is its nth.
    let Some(order) = merged_order(&sources)? else {
        return Ok(None);
    };

    let stem = super::tmp_stem(TMP_PREFIX);
    let tmp_pack = dir.join(format!("{stem}.pack"));
    let tmp_idx = dir.join(format!("{stem}.idx"));
    let written = write_pack(&tmp_pack, &sources, total32)
        .and_then(|checksum| write_index(&tmp_idx, &sources, &order, &checksum).map(|()| checksum));
    let checksum = match written {
        Ok(checksum) => checksum,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp_pack);
            let _ = std::fs::remove_file(&tmp_idx);
            return Err(e);
        }
    };
    let stem = named(dir, &checksum);
    // The pack first: a reader never finds an index without its pack.
    rename(&tmp_pack, &stem.with_extension("pack"))?;
    rename(&tmp_idx, &stem.with_extension("idx"))?;
    Ok(Some(stem))
}

/// Where a merge writes before its rename: named by the process, so the
/// files a merge left when its process ended can be told from ours.
const TMP_PREFIX: &str = "tmp_concat_";

/// Removes what merges and window packs of processes gone (killed
/// mid-write) left in `dir`: nothing reads those files, and a merge's is as
/// large as a merged pack.
pub(super) fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let ours = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| [TMP_PREFIX, super::whole::TMP_PREFIX].iter().find_map(|p| n.strip_prefix(p)))
            .and_then(|n| n.split(['_', '.']).next())
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok_and(|pid| pid != ours) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn source(pack: &PackFile) -> Result<Option<Source>> {
    let idx = pack.stem.with_extension("idx");
    let pack_path = pack.stem.with_extension("pack");
    let idx_len = len(&idx)?;
    let pack_len = len(&pack_path)?;
    // The header (a version 2 index) was read and checked when the pack
    // was listed.
    let (fanout, count) = (pack.fanout, pack.objects);
    let mut f = open(&idx)?;
    let fixed = IDX_HEADER as u64 + count * (OID_LEN as u64 + 8) + 2 * TRAILER;
    let Some(large_bytes) = idx_len.checked_sub(fixed).filter(|b| b % 8 == 0) else {
        return Ok(None);
    };
    let mut large = vec![0u8; large_bytes as usize];
    f.seek(SeekFrom::Start(IDX_HEADER as u64 + count * (OID_LEN as u64 + 8))).map_err(|e| io(&idx, e))?;
    f.read_exact(&mut large).map_err(|e| io(&idx, e))?;
    let large = large.chunks_exact(8).map(|c| u64::from_be_bytes(c.try_into().expect("eight bytes"))).collect();
    // The pack's header must be one this merge writes, and count the same.
    let mut head = [0u8; PACK_HEADER as usize];
    open(&pack_path)?.read_exact(&mut head).map_err(|e| io(&pack_path, e))?;
    let version = be32(&head[4..]);
    if &head[..4] != b"PACK" || !(version == 2 || version == 3) || u64::from(be32(&head[8..])) != count {
        return Ok(None);
    }
    let Some(entries) = pack_len.checked_sub(PACK_HEADER + TRAILER) else {
        return Ok(None);
    };
    Ok(Some(Source { idx, pack: pack_path, count, fanout, large, base: 0, entries }))
}

/// Which source each entry of the merged index comes from, in object id
/// order; `None` when an object is in two of them.
fn merged_order(sources: &[Source]) -> Result<Option<Vec<u8>>> {
    let mut readers = section_readers(sources, 0)?;
    let mut left: Vec<u64> = sources.iter().map(|s| s.count).collect();
    let mut heap = BinaryHeap::new();
    let next = |i: usize, readers: &mut [BufReader<File>], left: &mut [u64]| -> Result<Option<[u8; OID_LEN]>> {
        if left[i] == 0 {
            return Ok(None);
        }
        left[i] -= 1;
        let mut id = [0u8; OID_LEN];
        readers[i].read_exact(&mut id).map_err(|e| io(&sources[i].idx, e))?;
        Ok(Some(id))
    };
    for i in 0..sources.len() {
        if let Some(id) = next(i, &mut readers, &mut left)? {
            heap.push(std::cmp::Reverse((id, i)));
        }
    }
    let mut order = Vec::with_capacity(sources.iter().map(|s| s.count as usize).sum());
    let mut last: Option<[u8; OID_LEN]> = None;
    while let Some(std::cmp::Reverse((id, i))) = heap.pop() {
        if last == Some(id) {
            return Ok(None);
        }
        last = Some(id);
        order.push(i as u8);
        if let Some(id) = next(i, &mut readers, &mut left)? {
            heap.push(std::cmp::Reverse((id, i)));
        }
    }
    Ok(Some(order))
}

/// A reader per source at one section of its index: 0 the object ids, 1
/// the CRCs, 2 the offsets.
fn section_readers(sources: &[Source], section: u8) -> Result<Vec<BufReader<File>>> {
    sources
        .iter()
        .map(|s| {
            let at = IDX_HEADER as u64
                + match section {
                    0 => 0,
                    1 => s.count * OID_LEN as u64,
                    _ => s.count * (OID_LEN as u64 + 4),
                };
            let mut f = open(&s.idx)?;
            f.seek(SeekFrom::Start(at)).map_err(|e| io(&s.idx, e))?;
            Ok(BufReader::with_capacity(64 << 10, f))
        })
        .collect()
}

/// The new pack: a header, each source's entries in turn, the checksum.
fn write_pack(path: &Path, sources: &[Source], count: u32) -> Result<[u8; OID_LEN]> {
    let mut out = Hashed::new(create(path)?);
    let mut header = Vec::with_capacity(PACK_HEADER as usize);
    header.extend_from_slice(b"PACK");
    header.extend_from_slice(&2u32.to_be_bytes());
    header.extend_from_slice(&count.to_be_bytes());
    out.write_all(&header).map_err(|e| io(path, e))?;
    for s in sources {
        let mut f = open(&s.pack)?;
        f.seek(SeekFrom::Start(PACK_HEADER)).map_err(|e| io(&s.pack, e))?;
        let copied = std::io::copy(&mut f.take(s.entries), &mut out).map_err(|e| io(&s.pack, e))?;
        if copied != s.entries {
            return Err(io(&s.pack, std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the pack is cut short")));
        }
    }
    out.finish(path)
}

/// The new index (version 2): fan-out, ids, CRCs, offsets, 64-bit offsets,
/// the pack's checksum and its own.
fn write_index(path: &Path, sources: &[Source], order: &[u8], pack_checksum: &[u8; OID_LEN]) -> Result<()> {
    let mut out = Hashed::new(create(path)?);
    let w = |out: &mut Hashed, bytes: &[u8]| out.write_all(bytes).map_err(|e| io(path, e));
    w(&mut out, &IDX_MAGIC)?;
    w(&mut out, &2u32.to_be_bytes())?;
    for b in 0..256 {
        let n: u32 = sources.iter().map(|s| s.fanout[b]).sum();
        w(&mut out, &n.to_be_bytes())?;
    }
    // Ids, then CRCs: each copied from its source in the merged order.
    for (section, width) in [(0u8, OID_LEN), (1, 4)] {
        let mut readers = section_readers(sources, section)?;
        let mut buf = [0u8; OID_LEN];
        for &i in order {
            let i = usize::from(i);
            readers[i].read_exact(&mut buf[..width]).map_err(|e| io(&sources[i].idx, e))?;
            w(&mut out, &buf[..width])?;
        }
    }
    // Offsets, moved by where the source's entries now start.
    let mut readers = section_readers(sources, 2)?;
    let mut large_out: Vec<u64> = Vec::new();
    for &i in order {
        let s = &sources[usize::from(i)];
        let mut buf = [0u8; 4];
        readers[usize::from(i)].read_exact(&mut buf).map_err(|e| io(&s.idx, e))?;
        let raw = u32::from_be_bytes(buf);
        let old = if raw & LARGE != 0 {
            *s.large.get((raw & !LARGE) as usize).ok_or_else(|| {
                io(&s.idx, std::io::Error::new(std::io::ErrorKind::InvalidData, "a 64-bit offset past its table"))
            })?
        } else {
            u64::from(raw)
        };
        let entry = idx_offset(old - PACK_HEADER + s.base, &mut large_out);
        w(&mut out, &entry.to_be_bytes())?;
    }
    for offset in large_out {
        w(&mut out, &offset.to_be_bytes())?;
    }
    w(&mut out, pack_checksum)?;
    out.finish(path).map(|_| ())
}

/// A file written through SHA-1, ended by that checksum.
struct Hashed {
    file: BufWriter<File>,
    hash: Sha1,
}

impl Hashed {
    fn new(file: File) -> Self {
        Hashed { file: BufWriter::with_capacity(1 << 20, file), hash: Sha1::new() }
    }

    fn finish(mut self, path: &Path) -> Result<[u8; OID_LEN]> {
        let sum: [u8; OID_LEN] = self.hash.finalize_reset().into();
        self.file.write_all(&sum).map_err(|e| io(path, e))?;
        self.file.flush().map_err(|e| io(path, e))?;
        self.file.get_ref().sync_all().map_err(|e| io(path, e))?;
        Ok(sum)
    }
}

impl Write for Hashed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("four bytes"))
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io { context: format!("merging packs: {}", path.display()), source }
}

fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|e| io(path, e))
}

fn create(path: &Path) -> Result<File> {
    File::create(path).map_err(|e| io(path, e))
}

fn len(path: &Path) -> Result<u64> {
    std::fs::metadata(path).map(|m| m.len()).map_err(|e| io(path, e))
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| io(to, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_merge_of_a_process_gone_left_is_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join(format!("{TMP_PREFIX}{}_0.pack", u32::MAX));
        let gone_window = dir.path().join(format!("{}{}_3.idx", super::super::whole::TMP_PREFIX, u32::MAX));
        let ours = dir.path().join(format!("{}.pack", super::super::tmp_stem(TMP_PREFIX)));
        let pack = dir.path().join("pack-0123.pack");
        for f in [&gone, &gone_window, &ours, &pack] {
            std::fs::write(f, b"x").unwrap();
        }
        remove_stale(dir.path());
        assert!(!gone.exists() && !gone_window.exists());
        assert!(ours.exists() && pack.exists());
    }
}
