//! A batch of facts held as one byte buffer, for a log that keeps facts it
//! does not join on (the memory transport's per-scope log, which the index
//! beside it already holds in its own compact form).
//!
//! Strings repeated within the batch (actors, namespaces, verbs, timestamps)
//! are written once and referred to by number; uids and auditIDs in the
//! canonical UUID form take 16 bytes, canonical resourceVersions and
//! MicroTime stamps that print back identically an integer. Every fact reads
//! back exactly as packed.

use std::collections::HashMap;

use super::store::{Key, Reader, compact_timestamp, format_micros, put_str, put_varint, uuid_string};
use crate::attribution::Fact;

const EMPTY: u8 = 0;
const SEEN: u8 = 1;
const UUID: u8 = 2;
const NUM: u8 = 3;
const MICROS: u8 = 4;
const NEW: u8 = 5;

/// Facts packed into one allocation; [`PackedFacts::unpack`] returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedFacts {
    len: usize,
    bytes: Box<[u8]>,
}

struct Packer<'a> {
    out: Vec<u8>,
    seen: HashMap<&'a str, u64>,
}

impl<'a> Packer<'a> {
    fn field(&mut self, s: &'a str) {
        if s.is_empty() {
            self.out.push(EMPTY);
        } else if let Some(&i) = self.seen.get(s) {
            self.out.push(SEEN);
            put_varint(&mut self.out, i);
        } else if let Some(Key::Uuid(b)) = Key::id(s) {
            self.out.push(UUID);
            self.out.extend_from_slice(&b);
        } else if let Some(Key::Num(n)) = Key::rv(s) {
            self.out.push(NUM);
            put_varint(&mut self.out, n);
        } else if let Some(us) = compact_timestamp(s) {
            // Stamps repeat within a batch: the next one refers back.
            self.out.push(MICROS);
            self.out.extend_from_slice(&us.to_le_bytes());
            self.remember(s);
        } else {
            self.out.push(NEW);
            put_str(&mut self.out, s);
            self.remember(s);
        }
    }

    fn remember(&mut self, s: &'a str) {
        let n = self.seen.len() as u64;
        self.seen.insert(s, n);
    }
}

impl PackedFacts {
    pub fn pack(facts: &[Fact]) -> Self {
        let mut p = Packer { out: Vec::with_capacity(facts.len() * 64), seen: HashMap::new() };
        for f in facts {
            for s in [
                &f.author,
                &f.namespace,
                &f.name,
                &f.uid,
                &f.resource_version,
                &f.display_name,
                &f.email,
                &f.verb,
                &f.audit_id,
                &f.stage_timestamp,
                &f.label_selector,
            ] {
                p.field(s);
            }
            match &f.uids {
                None => p.out.push(0),
                Some(uids) => {
                    p.out.push(1);
                    put_varint(&mut p.out, uids.len() as u64);
                    for u in uids {
                        p.field(u);
                    }
                }
            }
        }
        Self { len: facts.len(), bytes: p.out.into_boxed_slice() }
    }

    /// How many facts it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The facts, exactly as packed.
    pub fn unpack(&self) -> Vec<Fact> {
        let mut r = Reader::new(&self.bytes);
        let mut table: Vec<String> = Vec::new();
        let mut field = |r: &mut Reader<'_>| -> String {
            match r.array::<1>()[0] {
                SEEN => table.get(r.varint() as usize).cloned().unwrap_or_default(),
                UUID => uuid_string(&r.array::<16>()),
                NUM => r.varint().to_string(),
                MICROS => {
                    let s = format_micros(i64::from_le_bytes(r.array::<8>())).unwrap_or_default();
                    table.push(s.clone());
                    s
                }
                NEW => {
                    let s = r.str().to_owned();
                    table.push(s.clone());
                    s
                }
                _ => String::new(),
            }
        };
        (0..self.len)
            .map(|_| Fact {
                author: field(&mut r),
                namespace: field(&mut r),
                name: field(&mut r),
                uid: field(&mut r),
                resource_version: field(&mut r),
                display_name: field(&mut r),
                email: field(&mut r),
                verb: field(&mut r),
                audit_id: field(&mut r),
                stage_timestamp: field(&mut r),
                label_selector: field(&mut r),
                uids: match r.array::<1>()[0] {
                    0 => None,
                    _ => {
                        let n = r.varint() as usize;
                        Some((0..n).map(|_| field(&mut r)).collect())
                    }
                },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
