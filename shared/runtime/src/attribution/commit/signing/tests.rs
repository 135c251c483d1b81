use super::*;
use git2::{Oid, Repository, Signature, Time};
use ssh_key::{PublicKey, SshSig};
use std::path::Path;
use std::process::{Command, Output};
use tempfile::TempDir;

const EMAIL: &str = "signer@example.com";

/// Runs a command that must exist on the machine; CI needs git and openssh-client (for ssh-keygen).
fn run(cmd: &mut Command) -> Output {
    let program = cmd.get_program().to_string_lossy().into_owned();
    cmd.output().unwrap_or_else(|e| panic!("cannot run `{program}` (install git and openssh-client): {e}"))
}

/// A git CLI invocation that ignores the user's and system's config.
fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).env("GIT_CONFIG_GLOBAL", "/dev/null").env("GIT_CONFIG_NOSYSTEM", "1");
    cmd
}

/// Creates a key with the real `ssh-keygen`, so parsing is tested against OpenSSH's own output.
fn keygen(dir: &Path, name: &str, args: &[&str]) -> String {
    let path = dir.join(name);
    let out = run(Command::new("ssh-keygen").args(["-q", "-C", "keygen-comment", "-f"]).arg(&path).args(args));
    assert!(out.status.success(), "ssh-keygen failed: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(path).unwrap()
}

fn fixed_signature() -> Signature<'static> {
    Signature::new("Signer", EMAIL, &Time::new(1_700_000_000, 0)).unwrap()
}

/// A repo with one file and the unsigned buffer of a root commit for it.
fn repo_with_buffer(message: &str) -> (TempDir, Repository, String) {
    let dir = TempDir::new().unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    let buffer = {
        let blob = repo.blob(b"hello\n").unwrap();
        let mut builder = repo.treebuilder(None).unwrap();
        builder.insert("hello.txt", blob, 0o100644).unwrap();
        let tree = repo.find_tree(builder.write().unwrap()).unwrap();
        let sig = fixed_signature();
        let buffer = repo.commit_create_buffer(&sig, &sig, message, &tree, &[]).unwrap();
        buffer.as_str().unwrap().to_owned()
    };
    (dir, repo, buffer)
}

fn commit_signed_on_main(repo: &Repository, buffer: &str, signature: &str) -> Oid {
    let oid = repo.commit_signed(buffer, signature, Some(SIGNATURE_FIELD)).unwrap();
    repo.reference("refs/heads/main", oid, true, "signed commit").unwrap();
    oid
}

/// Runs `git verify-commit` trusting `pubkey_line` for EMAIL.
fn verify_commit(dir: &Path, oid: Oid, pubkey_line: &str) -> Output {
    let allowed = dir.join("allowed_signers");
    std::fs::write(&allowed, format!("{EMAIL} {pubkey_line}\n")).unwrap();
    run(git(dir)
        .args(["-c", "gpg.format=ssh", "-c"])
        .arg(format!("gpg.ssh.allowedSignersFile={}", allowed.display()))
        .args(["verify-commit", "--raw"])
        .arg(oid.to_string()))
}

/// Full round trip: sign with `pem`, commit with git2, verify with the git CLI.
fn assert_git_verifies(pem: &str) {
    let signer = SshSigner::from_openssh(pem).unwrap();
    let (dir, repo, buffer) = repo_with_buffer("signed commit\n");
    let signature = signer.sign_commit(buffer.as_bytes()).unwrap();
    let oid = commit_signed_on_main(&repo, &buffer, &signature);
    let out = verify_commit(dir.path(), oid, &signer.public_key_line().unwrap());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "verify-commit failed for {}: {stderr}", signer.algorithm());
    assert!(stderr.contains("Good \"git\" signature"), "unexpected verify output: {stderr}");
}

#[test]
fn generated_ed25519_key_signs_commits_git_verifies() {
    let pem = generate_ed25519_key("reverser@example.com").unwrap();
    assert!(pem.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n"));
    assert_git_verifies(&pem);
}

#[test]
fn ssh_keygen_keys_of_every_supported_type_sign_commits_git_verifies() {
    let dir = TempDir::new().unwrap();
    for (name, args) in [
        ("ed25519", &["-t", "ed25519", "-N", ""][..]),
        ("p256", &["-t", "ecdsa", "-b", "256", "-N", ""]),
        ("p384", &["-t", "ecdsa", "-b", "384", "-N", ""]),
    ] {
        assert_git_verifies(&keygen(dir.path(), name, args));
    }
}

#[test]
fn signature_over_another_buffer_fails_verification() {
    let signer = SshSigner::from_openssh(&generate_ed25519_key("k").unwrap()).unwrap();
    let (dir, repo, buffer) = repo_with_buffer("the real message\n");
    let forged = signer.sign_commit(buffer.replace("the real message", "another message").as_bytes()).unwrap();
    let oid = commit_signed_on_main(&repo, &buffer, &forged);
    let out = verify_commit(dir.path(), oid, &signer.public_key_line().unwrap());
    assert!(!out.status.success(), "tampered commit verified: {}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("Good \"git\" signature"));
}

#[test]
fn signature_from_an_untrusted_key_fails_verification() {
    let signer = SshSigner::from_openssh(&generate_ed25519_key("k").unwrap()).unwrap();
    let other = public_key_line(&generate_ed25519_key("other").unwrap()).unwrap();
    let (dir, repo, buffer) = repo_with_buffer("msg\n");
    let oid = commit_signed_on_main(&repo, &buffer, &signer.sign_commit(buffer.as_bytes()).unwrap());
    assert!(!verify_commit(dir.path(), oid, &other).status.success());
}

/// ed25519 is deterministic, so for the same key, author, date and message our commit must be
/// byte-identical to one made by `git commit-tree -S` with `gpg.format=ssh`.
#[test]
fn commit_is_identical_to_one_signed_by_git_itself() {
    let (dir, repo, buffer) = repo_with_buffer("same message\n");
    let key_path = dir.path().join("key");
    std::fs::write(&key_path, generate_ed25519_key("k").unwrap()).unwrap();
    let signer = SshSigner::from_openssh(&std::fs::read_to_string(&key_path).unwrap()).unwrap();
    // ssh-keygen refuses to sign with a group/world-readable key file.
    std::fs::set_permissions(&key_path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let ours = commit_signed_on_main(&repo, &buffer, &signer.sign_commit(buffer.as_bytes()).unwrap());

    let tree = repo.find_commit(ours).unwrap().tree_id().to_string();
    let date = "1700000000 +0000";
    let out = run(git(dir.path())
        .args(["-c", "gpg.format=ssh", "-c"])
        .arg(format!("user.signingKey={}", key_path.display()))
        .args(["commit-tree", "-S", "-m", "same message", &tree])
        .envs([("GIT_AUTHOR_NAME", "Signer"), ("GIT_COMMITTER_NAME", "Signer")])
        .envs([("GIT_AUTHOR_EMAIL", EMAIL), ("GIT_COMMITTER_EMAIL", EMAIL)])
        .envs([("GIT_AUTHOR_DATE", date), ("GIT_COMMITTER_DATE", date)]));
    assert!(out.status.success(), "git commit-tree -S failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), ours.to_string());
}

#[test]
fn signature_is_sshsig_armor_over_the_git_namespace_with_sha512() {
    let signer = SshSigner::from_openssh(&generate_ed25519_key("k").unwrap()).unwrap();
    let armored = signer.sign_commit(b"tree 0000\n\nmsg\n").unwrap();
    assert!(armored.starts_with("-----BEGIN SSH SIGNATURE-----\n"));
    assert!(armored.ends_with("\n-----END SSH SIGNATURE-----"));
    let sig = SshSig::from_pem(&armored).unwrap();
    assert_eq!(sig.namespace(), GIT_NAMESPACE);
    assert_eq!(sig.hash_alg(), HashAlg::Sha512);
    let public = PublicKey::from_openssh(&signer.public_key_line().unwrap()).unwrap();
    public.verify(GIT_NAMESPACE, b"tree 0000\n\nmsg\n", &sig).unwrap();
    assert!(public.verify(GIT_NAMESPACE, b"tree 0000\n\nmsh\n", &sig).is_err());
}

#[test]
fn public_key_line_has_algorithm_base64_and_comment() {
    let pem = generate_ed25519_key("reverser@example.com").unwrap();
    let line = public_key_line(&pem).unwrap();
    let parts: Vec<&str> = line.split(' ').collect();
    assert_eq!(parts.len(), 3, "{line}");
    assert_eq!(parts[0], "ssh-ed25519");
    assert!(parts[1].starts_with("AAAA"));
    assert_eq!(parts[2], "reverser@example.com");
    // Two generations never collide.
    assert_ne!(line, public_key_line(&generate_ed25519_key("reverser@example.com").unwrap()).unwrap());
}

#[test]
fn key_with_surrounding_whitespace_and_crlf_is_accepted() {
    let pem = generate_ed25519_key("k").unwrap();
    let mangled = format!("\n  {}\r\n\n", pem.replace('\n', "\r\n"));
    assert_eq!(public_key_line(&mangled).unwrap(), public_key_line(&pem).unwrap());
}

#[test]
fn a_passphrase_protected_key_signs_with_its_passphrase_and_is_refused_without() {
    let dir = TempDir::new().unwrap();
    let pem = keygen(dir.path(), "enc", &["-t", "ed25519", "-N", "correct horse"]);
    let err = SshSigner::from_openssh(&pem).unwrap_err();
    assert!(matches!(err, SigningError::EncryptedKey), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("passphrase-protected") && msg.contains("`passphrase` key"), "{msg}");
    let err = SshSigner::from_openssh_with_passphrase(&pem, Some("wrong")).unwrap_err();
    assert!(matches!(err, SigningError::WrongPassphrase { .. }), "{err:?}");
    // With its passphrase (gitops-reverser's `passphrase` key), commits
    // git verifies.
    let signer = SshSigner::from_openssh_with_passphrase(&pem, Some("correct horse")).unwrap();
    let (dir, repo, buffer) = repo_with_buffer("signed with a decrypted key\n");
    let oid = commit_signed_on_main(&repo, &buffer, &signer.sign_commit(buffer.as_bytes()).unwrap());
    let out = verify_commit(dir.path(), oid, &signer.public_key_line().unwrap());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn rsa_key_is_refused_as_unsupported_algorithm() {
    let dir = TempDir::new().unwrap();
    let pem = keygen(dir.path(), "rsa", &["-t", "rsa", "-b", "2048", "-N", ""]);
    let err = SshSigner::from_openssh(&pem).unwrap_err();
    assert!(matches!(&err, SigningError::UnsupportedAlgorithm { algorithm } if algorithm == "ssh-rsa"), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("`ssh-rsa` is not supported") && msg.contains("use an ed25519 key"), "{msg}");
}

#[test]
fn every_nistp521_key_is_refused_whether_or_not_ssh_key_can_parse_it() {
    let dir = TempDir::new().unwrap();
    for i in 0..6 {
        let pem = keygen(dir.path(), &format!("p521-{i}"), &["-t", "ecdsa", "-b", "521", "-N", ""]);
        let err = SshSigner::from_openssh(&pem).unwrap_err();
        let expected = "ecdsa-sha2-nistp521";
        assert!(matches!(&err, SigningError::UnsupportedAlgorithm { algorithm } if algorithm == expected), "{err:?}");
    }
}

/// SSH wire-format string: u32 big-endian length, then the bytes.
fn wire_string(s: &[u8]) -> Vec<u8> {
    [&u32::try_from(s.len()).unwrap().to_be_bytes()[..], s].concat()
}

/// An OpenSSH key envelope around `public_blob` with junk private bytes, which ssh-key can't parse.
fn unparsable_key(public_blob: &[u8]) -> String {
    let header = [&b"openssh-key-v1\0"[..], &wire_string(b"none"), &wire_string(b"none"), &wire_string(b"")];
    let bytes = [&header.concat()[..], &1u32.to_be_bytes(), &wire_string(public_blob), &wire_string(b"junk")];
    let body = base64::engine::general_purpose::STANDARD.encode(bytes.concat());
    format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----\n")
}

#[test]
fn unparsable_key_is_reported_by_its_declared_algorithm() {
    let p521 = unparsable_key(&[wire_string(b"ecdsa-sha2-nistp521"), wire_string(b"nistp521")].concat());
    let err = SshSigner::from_openssh(&p521).unwrap_err();
    assert!(err.to_string().contains("`ecdsa-sha2-nistp521` is not supported"), "{err}");
    // A supported type that fails to parse is a broken key, not an unsupported one.
    let ed25519 = unparsable_key(&[wire_string(b"ssh-ed25519"), wire_string(&[7; 32])].concat());
    let err = SshSigner::from_openssh(&ed25519).unwrap_err();
    assert!(matches!(err, SigningError::UnreadableKey { .. }), "{err:?}");
}

#[test]
fn declared_algorithm_reads_real_keys_including_encrypted_ones() {
    let dir = TempDir::new().unwrap();
    let encrypted = keygen(dir.path(), "enc", &["-t", "ecdsa", "-b", "384", "-N", "pw"]);
    assert_eq!(declared_algorithm(&encrypted).as_deref(), Some("ecdsa-sha2-nistp384"));
    assert_eq!(declared_algorithm(&generate_ed25519_key("k").unwrap()).as_deref(), Some("ssh-ed25519"));
    assert_eq!(declared_algorithm("not a key"), None);
}

#[test]
fn unknown_algorithm_is_refused_as_unsupported() {
    // ssh-key keeps key types it does not know (vendor or future ones) as opaque bytes.
    use ssh_key::private::{KeypairData, OpaqueKeypair};
    use ssh_key::public::OpaquePublicKey;
    let public = OpaquePublicKey::new(vec![1, 2, 3], Algorithm::new("vendor-key@example.com").unwrap());
    let key = PrivateKey::new(KeypairData::Other(OpaqueKeypair::new(vec![4, 5, 6], public)), "c").unwrap();
    let err = SshSigner::from_openssh(&key.to_openssh(LineEnding::LF).unwrap()).unwrap_err();
    assert!(err.to_string().contains("`vendor-key@example.com` is not supported"), "{err}");
}

#[test]
fn unreadable_keys_get_format_specific_advice() {
    let cases = [
        ("", "the key is empty"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA== me", "looks like a public key"),
        ("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n", "PEM/PKCS#8"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nnot base64!\n-----END OPENSSH PRIVATE KEY-----\n", ""),
    ];
    for (text, hint) in cases {
        let err = SshSigner::from_openssh(text).unwrap_err();
        assert!(matches!(err, SigningError::UnreadableKey { .. }), "{text:?}: {err:?}");
        let msg = err.to_string();
        assert!(msg.starts_with("cannot read the SSH signing key"), "{msg}");
        assert!(msg.contains(hint) && msg.contains("provide an unencrypted OpenSSH private key"), "{msg}");
    }
}

#[test]
fn debug_output_never_contains_key_material() {
    let pem = generate_ed25519_key("k").unwrap();
    let debug = format!("{:?}", SshSigner::from_openssh(&pem).unwrap());
    assert!(debug.contains("ssh-ed25519") && debug.contains("SHA256:"), "{debug}");
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    assert!(!debug.contains(&body[..20]));
}
