//! Pack maintenance's executor: merges the clone's packs as
//! `rules::attribution::commit::repack` decides, on a thread of its own, so
//! a large merge never holds a commit window back.
//!
//! A merge is exact: the new pack holds every object of the packs it
//! replaces, read from their indexes, and they are deleted only once it is
//! on disk. Nothing depends on what is reachable, so no object is ever lost
//! to a merge, whatever the branch did meanwhile. Packs with a `.keep` file
//! are left alone, as git leaves them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use git2::{Oid, Repository};
use rules::attribution::commit::repack::rollup;

use super::{GitError as Error, Result};

mod concat;
pub(super) mod whole;

/// One pack in `objects/pack`.
#[derive(Debug, Clone)]
pub(super) struct PackFile {
    /// `objects/pack/pack-<hash>` (no extension).
    stem: PathBuf,
    pub(super) objects: u64,
    /// The index's cumulative counts by first byte (`objects` is the last).
    fanout: [u32; 256],
}

/// The packs of the clone at `repo_dir`, kept ones left out.
pub(super) fn packs(repo_dir: &Path) -> Result<Vec<PackFile>> {
    let dir = repo_dir.join("objects").join("pack");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(io(format!("listing {}", dir.display()), source)),
    };
    let mut packs = Vec::new();
    for entry in entries {
        let path = entry.map_err(|source| io(format!("listing {}", dir.display()), source))?.path();
        if path.extension().is_none_or(|e| e != "idx") {
            continue;
        }
        let stem = path.with_extension("");
        if stem.with_extension("keep").exists() || !stem.with_extension("pack").exists() {
            continue;
        }
        let header = read_prefix(&path, IDX_HEADER)?;
        let fanout = idx_fanout(&header, &path)?;
        packs.push(PackFile { objects: u64::from(fanout[255]), fanout, stem });
    }
    Ok(packs)
}

/// Version 2 pack index: magic, version, then 256 cumulative counts by
/// first byte (gitformat-pack(5)); the last count is the pack's objects.
const IDX_MAGIC: [u8; 4] = [0xff, b't', b'O', b'c'];
const IDX_HEADER: usize = 8 + 256 * 4;
const OID_LEN: usize = 20;
/// A merge hands its pack to the indexer this many bytes at a time.
const MERGE_PIECE: usize = 8 << 20;

/// Keeps the last `tail.len()` bytes of a stream seen piece by piece.
fn keep_tail(tail: &mut [u8; OID_LEN], bytes: &[u8]) {
    if bytes.len() >= OID_LEN {
        tail.copy_from_slice(&bytes[bytes.len() - OID_LEN..]);
    } else {
        tail.rotate_left(bytes.len());
        tail[OID_LEN - bytes.len()..].copy_from_slice(bytes);
    }
}

fn idx_fanout(header: &[u8], path: &Path) -> Result<[u32; 256]> {
    if header.len() < IDX_HEADER || header[..4] != IDX_MAGIC || header[4..8] != [0, 0, 0, 2] {
        return Err(io(
            format!("reading {}", path.display()),
            std::io::Error::new(std::io::ErrorKind::InvalidData, "not a version 2 pack index"),
        ));
    }
    let mut fanout = [0u32; 256];
    for (i, n) in fanout.iter_mut().enumerate() {
        *n = u32::from_be_bytes(header[8 + 4 * i..12 + 4 * i].try_into().expect("four bytes"));
    }
    Ok(fanout)
}

/// An index offset with this bit set is a position in the 64-bit table.
const LARGE_OFFSET: u32 = 0x8000_0000;

/// `offset` as a version 2 index's offset entry: itself below 2 GiB, else
/// its position in the 64-bit table, to which it is appended.
fn idx_offset(offset: u64, large: &mut Vec<u64>) -> u32 {
    match u32::try_from(offset) {
        Ok(small) if small & LARGE_OFFSET == 0 => small,
        _ => {
            large.push(offset);
            LARGE_OFFSET | u32::try_from(large.len() - 1).expect("fewer than 2^31 large offsets")
        }
    }
}

/// A name for a temporary file of this process in `objects/pack` (less its
/// extension), unique within the process: two writers of one process may
/// write into one local remote. What a process gone left is removed by
/// `concat::remove_stale`, which reads the pid back.
fn tmp_stem(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Where the pack whose trailing checksum is `checksum` lives in `dir`
/// (without extension): git names a pack by it.
fn named(dir: &Path, checksum: &[u8; OID_LEN]) -> PathBuf {
    let hex: String = checksum.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("pack-{hex}"))
}

/// The object ids a pack index lists, in its order (sorted).
fn idx_objects(path: &Path) -> Result<Vec<Oid>> {
    let bytes = std::fs::read(path).map_err(|source| io(format!("reading {}", path.display()), source))?;
    let count = idx_fanout(&bytes, path)?[255] as usize;
    let names = bytes.get(IDX_HEADER..IDX_HEADER + count * OID_LEN).ok_or_else(|| {
        io(
            format!("reading {}", path.display()),
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the pack index is cut short"),
        )
    })?;
    names
        .chunks_exact(OID_LEN)
        .map(|id| Oid::from_bytes(id).map_err(super::writer::git(format!("reading {}", path.display()))))
        .collect()
}

fn read_prefix(path: &Path, len: usize) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(len);
    std::fs::File::open(path)
        .and_then(|f| f.take(len as u64).read_to_end(&mut buf))
        .map_err(|source| io(format!("reading {}", path.display()), source))?;
    Ok(buf)
}

fn io(context: String, source: std::io::Error) -> Error {
    Error::Io { context, source }
}

/// What one merge did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Merged {
    pub(super) packs: usize,
    pub(super) objects: usize,
    /// Concatenated byte for byte; else rebuilt by libgit2's pack builder.
    pub(super) concatenated: bool,
}

/// Merges the packs the rule picks, again and again until it picks none
/// (a merge may fill the tier above). Returns each merge done.
pub(super) fn maintain(repo_dir: &Path) -> Result<Vec<Merged>> {
    concat::remove_stale(&repo_dir.join("objects").join("pack"));
    let mut done = Vec::new();
    loop {
        let packs = packs(repo_dir)?;
        let sizes: Vec<u64> = packs.iter().map(|p| p.objects).collect();
        let Some(picked) = rollup(&sizes) else {
            return Ok(done);
        };
        let picked: Vec<&PackFile> = picked.iter().map(|&i| &packs[i]).collect();
        done.push(merge(repo_dir, &picked)?);
    }
}

/// Writes one pack holding every object of `packs`, then deletes them:
/// their entries concatenated, or (when they share an object) rebuilt.
fn merge(repo_dir: &Path, packs: &[&PackFile]) -> Result<Merged> {
    let context = || format!("merging {} packs of the clone at {}", packs.len(), repo_dir.display());
    let dir = repo_dir.join("objects").join("pack");
    let (written, objects, concatenated) = match concat::concatenate(&dir, packs)? {
        Some(stem) => (stem, packs.iter().map(|p| p.objects as usize).sum(), true),
        None => {
            let (stem, objects) = rebuild(repo_dir, packs)?;
            (stem, objects, false)
        }
    };
    for pack in packs {
        if written == pack.stem {
            continue; // the same objects, so the same pack
        }
        // The index first: a reader never finds an index without its pack.
        for ext in ["idx", "pack", "rev", "mtimes", "bitmap"] {
            let path = pack.stem.with_extension(ext);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(io(format!("{}: removing {}", context(), path.display()), source)),
            }
        }
    }
    Ok(Merged { packs: packs.len(), objects, concatenated })
}

/// One pack of every object of `packs`, built anew by libgit2's pack
/// builder (a fresh delta search); returns its path without extension and
/// its objects.
fn rebuild(repo_dir: &Path, packs: &[&PackFile]) -> Result<(PathBuf, usize)> {
    let context = || format!("rebuilding {} packs of the clone at {}", packs.len(), repo_dir.display());
    let git = |source| super::writer::git(context())(source);
    // A handle of its own: its object database lists the packs as they are
    // now, and it is dropped before they are deleted.
    let repo = Repository::open_bare(repo_dir).map_err(git)?;
    let mut builder = repo.packbuilder().map_err(git)?;
    // One thread: the merge runs beside the writer, on a machine it shares.
    builder.set_threads(1);
    for pack in packs {
        for id in idx_objects(&pack.stem.with_extension("idx"))? {
            builder.insert_object(id, None).map_err(git)?;
        }
    }
    let objects = builder.object_count();
    // The pack goes to the object database's pack writer in large pieces:
    // each piece its indexer takes unmaps what it has mapped of the pack
    // so far, and the pack builder's own writer hands it one per object
    // (a merge spent a quarter of its time in munmap that way).
    let odb = repo.odb().map_err(git)?;
    let mut writer = odb.packwriter().map_err(git)?;
    let mut piece: Vec<u8> = Vec::with_capacity(MERGE_PIECE);
    let mut trailer = [0u8; OID_LEN];
    let mut failed: Option<std::io::Error> = None;
    builder
        .foreach(|bytes| {
            keep_tail(&mut trailer, bytes);
            piece.extend_from_slice(bytes);
            if piece.len() >= MERGE_PIECE {
                if let Err(e) = std::io::Write::write_all(&mut writer, &piece) {
                    failed = Some(e);
                    return false;
                }
                piece.clear();
            }
            true
        })
        .map_err(|e| match failed.take() {
            Some(source) => io(context(), source),
            None => git(e),
        })?;
    std::io::Write::write_all(&mut writer, &piece).map_err(|source| io(context(), source))?;
    writer.commit().map_err(git)?;
    drop(writer);
    drop(odb);
    drop(builder);
    drop(repo);
    Ok((named(&repo_dir.join("objects").join("pack"), &trailer), objects))
}

/// Runs [`maintain`] on a background thread, one at a time: asking while
/// one runs is remembered, and it runs again when done.
#[derive(Debug, Default, Clone)]
pub(super) struct Maintainer {
    state: Arc<MaintainerState>,
}

#[derive(Debug, Default)]
struct MaintainerState {
    running: AtomicBool,
    again: AtomicBool,
    /// Merges finished; the writer reopens its handle when this moves, so
    /// deleted packs' files are let go of.
    merges: AtomicU64,
    /// Of those, the ones concatenated.
    concatenated: AtomicU64,
}

impl Maintainer {
    /// Starts a pass unless one is running (then that one makes another).
    pub(super) fn request(&self, repo_dir: &Path) {
        self.state.again.store(true, Ordering::SeqCst);
        if self.state.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let state = Arc::clone(&self.state);
        let dir = repo_dir.to_path_buf();
        let spawned = std::thread::Builder::new().name("repack".into()).spawn(move || {
            loop {
                while state.again.swap(false, Ordering::SeqCst) {
                    match maintain(&dir) {
                        Ok(merged) => {
                            for m in &merged {
                                tracing::debug!(
                                    packs = m.packs,
                                    objects = m.objects,
                                    concatenated = m.concatenated,
                                    dir = %dir.display(),
                                    "merged packs"
                                );
                            }
                            let copied = merged.iter().filter(|m| m.concatenated).count();
                            state.concatenated.fetch_add(copied as u64, Ordering::SeqCst);
                            state.merges.fetch_add(merged.len() as u64, Ordering::SeqCst);
                        }
                        // The packs stay as they were: lookups are slower,
                        // nothing is lost, and the next window tries again.
                        Err(error) => tracing::warn!(%error, "merging the clone's packs failed; they are kept"),
                    }
                }
                state.running.store(false, Ordering::SeqCst);
                // A request that came between the last check and the store
                // above found `running` set and left: take it.
                if !state.again.load(Ordering::SeqCst) || state.running.swap(true, Ordering::SeqCst) {
                    return;
                }
            }
        });
        if let Err(error) = spawned {
            self.state.running.store(false, Ordering::SeqCst);
            tracing::warn!(%error, "cannot start the thread that merges the clone's packs; they are kept");
        }
    }

    /// Merges finished so far.
    pub(super) fn merges(&self) -> u64 {
        self.state.merges.load(Ordering::SeqCst)
    }

    /// Merges done by concatenation so far.
    #[cfg(test)]
    pub(super) fn concatenated(&self) -> u64 {
        self.state.concatenated.load(Ordering::SeqCst)
    }

    /// Waits for the pass in flight, if any (tests, and a clean shutdown).
    #[cfg(test)]
    pub(super) fn wait(&self) {
        while self.state.running.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_of_a_stream_is_kept_whatever_its_pieces() {
        let stream: Vec<u8> = (0..100u8).collect();
        for split in [1, 3, 19, 20, 21, 64] {
            let mut tail = [0u8; OID_LEN];
            for piece in stream.chunks(split) {
                keep_tail(&mut tail, piece);
            }
            assert_eq!(tail[..], stream[80..], "pieces of {split}");
        }
    }

    #[test]
    fn offsets_past_2_gib_go_to_the_64_bit_table_in_order() {
        let mut large = Vec::new();
        assert_eq!(idx_offset(12, &mut large), 12);
        assert_eq!(idx_offset(0x7fff_ffff, &mut large), 0x7fff_ffff);
        assert_eq!(idx_offset(0x8000_0000, &mut large), LARGE_OFFSET);
        assert_eq!(idx_offset(5 << 32, &mut large), LARGE_OFFSET | 1);
        assert_eq!(large, [0x8000_0000, 5 << 32]);
    }
}
