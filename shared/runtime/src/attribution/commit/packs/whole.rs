//! A pack of whole objects and its index, written here rather than by
//! libgit2's pack builder: a window's new objects (its commits, the trees
//! on the paths it changed, the blobs it wrote), each stored undeltified
//! (gitformat-pack(5): pack version 2, index version 2, SHA-1).
//!
//! Issue 31, perf on `serve` at 500 changes/s: the pack builder's delta
//! search was 31% of its CPU, its walk that leaves out what the parent
//! reaches (every tree of the mirror, inflated and hashed) 11%, and the
//! indexer then inflated and hashed every object again to write the index.
//! A window's objects are distinct manifests and the trees holding them;
//! the bases they would delta well against are their own previous
//! versions, in older packs, which an on-disk pack cannot refer to. Here
//! each object is compressed once (zlib's fastest level: trees are mostly
//! object ids, which do not compress) and the index comes from what was
//! written.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::ZlibEncoder;
use git2::{ObjectType, Oid};
use sha1::{Digest, Sha1};

use super::{IDX_MAGIC, OID_LEN, idx_offset, io, named};
use crate::attribution::commit::{GitError as Error, Result};

/// A pack and its index, in memory.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Whole {
    pub(crate) pack: Vec<u8>,
    pub(crate) idx: Vec<u8>,
    /// The pack's trailing checksum, which names it.
    pub(crate) checksum: [u8; OID_LEN],
    pub(crate) objects: usize,
}

impl std::fmt::Debug for Whole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Whole").field("objects", &self.objects).field("bytes", &self.pack.len()).finish()
    }
}

/// The pack type number of an object (gitformat-pack(5)).
fn type_number(kind: ObjectType) -> Option<u8> {
    match kind {
        ObjectType::Commit => Some(1),
        ObjectType::Tree => Some(2),
        ObjectType::Blob => Some(3),
        ObjectType::Tag => Some(4),
        _ => None,
    }
}

/// An entry's header: type and inflated size, 4 bits then 7 per byte.
fn entry_header(out: &mut Vec<u8>, kind: u8, size: usize) {
    let mut rest = size >> 4;
    let mut byte = (kind << 4) | (size & 0x0f) as u8;
    while rest > 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
}

/// The pack of `objects` (id, type, content), in their order, each once,
/// and its index. The ids are taken as given: each must be its content's.
pub(crate) fn build<'a>(objects: impl IntoIterator<Item = (Oid, ObjectType, &'a [u8])>) -> Result<Whole> {
    let mut pack = Vec::with_capacity(1 << 20);
    pack.extend_from_slice(b"PACK");
    pack.extend_from_slice(&2u32.to_be_bytes());
    pack.extend_from_slice(&0u32.to_be_bytes());
    // (id, crc, offset) of each entry.
    let mut entries: Vec<([u8; OID_LEN], u32, u64)> = Vec::new();
    let mut seen = HashSet::new();
    for (id, kind, data) in objects {
        if !seen.insert(id) {
            continue;
        }
        let kind =
            type_number(kind).ok_or_else(|| invalid(format!("object {id} is not a commit, tree, blob or tag")))?;
        let at = pack.len();
        entry_header(&mut pack, kind, data.len());
        let mut z = ZlibEncoder::new(pack, Compression::fast());
        z.write_all(data).map_err(|e| io("compressing an object of the window's pack".into(), e))?;
        pack = z.finish().map_err(|e| io("compressing an object of the window's pack".into(), e))?;
        let mut crc = flate2::Crc::new();
        crc.update(&pack[at..]);
        let id: [u8; OID_LEN] = id.as_bytes().try_into().map_err(|_| invalid(format!("object {id} is not SHA-1")))?;
        entries.push((id, crc.sum(), at as u64));
    }
    let count = u32::try_from(entries.len()).map_err(|_| invalid("more than 2^32 objects in one pack".into()))?;
    pack[8..12].copy_from_slice(&count.to_be_bytes());
    let checksum: [u8; OID_LEN] = Sha1::digest(&pack).into();
    pack.extend_from_slice(&checksum);

    entries.sort_unstable_by_key(|e| e.0);
    let mut idx = Vec::with_capacity(8 + 256 * 4 + entries.len() * (OID_LEN + 8) + 2 * OID_LEN);
    idx.extend_from_slice(&IDX_MAGIC);
    idx.extend_from_slice(&2u32.to_be_bytes());
    let mut below = 0usize;
    for first in 0..=255u8 {
        while below < entries.len() && entries[below].0[0] <= first {
            below += 1;
        }
        idx.extend_from_slice(&(below as u32).to_be_bytes());
    }
    for (id, _, _) in &entries {
        idx.extend_from_slice(id);
    }
    for (_, crc, _) in &entries {
        idx.extend_from_slice(&crc.to_be_bytes());
    }
    let mut large: Vec<u64> = Vec::new();
    for &(_, _, offset) in &entries {
        idx.extend_from_slice(&idx_offset(offset, &mut large).to_be_bytes());
    }
    for offset in large {
        idx.extend_from_slice(&offset.to_be_bytes());
    }
    idx.extend_from_slice(&checksum);
    let own: [u8; OID_LEN] = Sha1::digest(&idx).into();
    idx.extend_from_slice(&own);
    Ok(Whole { pack, idx, checksum, objects: entries.len() })
}

pub(super) const TMP_PREFIX: &str = "tmp_whole_";

/// Puts `whole` into the object database at `objects_dir` (`objects/`):
/// the pack, then its index (an object database finds a pack by its
/// index, so it never sees half of one). Each is on disk before it gets
/// its name, as git's default `core.fsync` has it for packs and their
/// indexes: the branch moves to the window's commits only after this
/// returns, so a crash cannot leave it naming objects lost with the page
/// cache. Returns the pack's path without extension.
pub(crate) fn install(objects_dir: &Path, whole: &Whole) -> Result<PathBuf> {
    let dir = objects_dir.join("pack");
    std::fs::create_dir_all(&dir).map_err(|e| io(format!("creating {}", dir.display()), e))?;
    let stem = named(&dir, &whole.checksum);
    let tmp_stem = super::tmp_stem(TMP_PREFIX);
    for (ext, bytes) in [("pack", &whole.pack), ("idx", &whole.idx)] {
        let tmp = dir.join(format!("{tmp_stem}.{ext}"));
        let target = stem.with_extension(ext);
        write_synced(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, &target))
            .map_err(|e| io(format!("writing {}", target.display()), e))?;
    }
    Ok(stem)
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.sync_all()
}

fn invalid(why: String) -> Error {
    io("writing the window's pack".into(), std::io::Error::new(std::io::ErrorKind::InvalidInput, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn entry_headers_carry_type_and_size_as_git_reads_them() {
        let header = |kind, size| {
            let mut out = Vec::new();
            entry_header(&mut out, kind, size);
            out
        };
        assert_eq!(header(3, 0), [0x30]);
        assert_eq!(header(3, 15), [0x3f]);
        assert_eq!(header(3, 16), [0xb0, 0x01]);
        assert_eq!(header(2, 1000), [0xa8, 0x3e]);
        assert_eq!(header(1, 1 << 20), [0x90, 0x80, 0x80, 0x04]);
    }

    /// Objects made by libgit2 in one repository, packed here and installed
    /// into another: git reads every object back, `verify-pack` and
    /// `fsck --strict` pass, and the index is git's own for the pack.
    #[test]
    fn a_whole_pack_is_read_by_git_as_it_reads_its_own() {
        let src = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_bare(src.path()).unwrap();
        let big: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let blobs: Vec<Oid> = [&b""[..], b"a: 1\n", &big].iter().map(|b| repo.blob(b).unwrap()).collect();
        let mut tb = repo.treebuilder(None).unwrap();
        for (i, id) in blobs.iter().enumerate() {
            tb.insert(format!("f{i}.yaml"), *id, 0o100644).unwrap();
        }
        let sub = tb.write().unwrap();
        let mut tb = repo.treebuilder(None).unwrap();
        tb.insert("dir", sub, 0o040000).unwrap();
        tb.insert("top.yaml", blobs[1], 0o100644).unwrap();
        let root = repo.find_tree(tb.write().unwrap()).unwrap();
        let sig = git2::Signature::now("a", "a@example.com").unwrap();
        let c1 = repo.commit(None, &sig, &sig, "one", &root, &[]).unwrap();
        let c2 = repo.commit(None, &sig, &sig, "two", &root, &[&repo.find_commit(c1).unwrap()]).unwrap();

        let odb = repo.odb().unwrap();
        let ids = [c2, c1, root.id(), sub, blobs[0], blobs[1], blobs[2], blobs[1]];
        let objects: Vec<_> = ids.iter().map(|id| odb.read(*id).unwrap()).collect();
        let whole = build(objects.iter().map(|o| (o.id(), o.kind(), o.data()))).unwrap();
        assert_eq!(whole.objects, 7, "the repeated blob is packed once");

        let dst = tempfile::tempdir().unwrap();
        git2::Repository::init_bare(dst.path()).unwrap();
        let stem = install(&dst.path().join("objects"), &whole).unwrap();
        git(dst.path(), &["update-ref", "refs/heads/main", &c2.to_string()]);
        let verify = git(dst.path(), &["verify-pack", "-v", &stem.with_extension("idx").display().to_string()]);
        assert!(verify.contains("non delta: 7 objects"), "{verify}");
        git(dst.path(), &["fsck", "--strict", "--no-dangling"]);
        assert_eq!(git(dst.path(), &["cat-file", "-p", &format!("{c2}:dir/f1.yaml")]), "a: 1\n");
        let size = git(dst.path(), &["cat-file", "-s", &blobs[2].to_string()]);
        assert_eq!(size.trim(), big.len().to_string());
        // git's own index of the same pack is byte for byte ours.
        let theirs = dst.path().join("theirs.idx");
        git(
            dst.path(),
            &["index-pack", "-o", &theirs.display().to_string(), &stem.with_extension("pack").display().to_string()],
        );
        assert_eq!(std::fs::read(theirs).unwrap(), whole.idx);
        assert!(
            !std::fs::read_dir(dst.path().join("objects/pack")).unwrap().any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(TMP_PREFIX)),
            "no temporary file is left"
        );
    }
}
