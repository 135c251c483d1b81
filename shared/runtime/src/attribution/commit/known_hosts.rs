//! SSH host trust for pushes: a host key is accepted only when a
//! `known_hosts` line names the host (or `[host]:port`) with exactly that
//! key. No entry, no trust: SSH fails closed, as the GitProvider's
//! `knownHostsRef` documents.

use base64::Engine as _;

/// The SSH port of a remote URL: `ssh://[user@]host[:port]/path`, or 22 for
/// the scp form `user@host:path`.
pub fn ssh_port(url: &str) -> u16 {
    url.strip_prefix("ssh://")
        .and_then(|rest| rest.split('/').next())
        .and_then(|authority| authority.rsplit('@').next())
        .and_then(|hostport| hostport.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or(22)
}

/// Whether a hashed host field `|1|<salt>|<hash>` (OpenSSH's
/// `HashKnownHosts`: base64 of a salt and of HMAC-SHA1(salt, name)) names
/// `name`.
fn hashed_names(field: &str, name: &str) -> bool {
    use hmac::Mac as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let Some((salt, hash)) = field.strip_prefix("|1|").and_then(|rest| rest.split_once('|')) else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (b64.decode(salt), b64.decode(hash)) else {
        return false;
    };
    let Ok(mut mac) = hmac::Hmac::<sha1::Sha1>::new_from_slice(&salt) else {
        return false;
    };
    mac.update(name.as_bytes());
    mac.verify_slice(&hash).is_ok()
}

/// Whether `known_hosts` (OpenSSH format: host patterns in clear, or hashed
/// `|1|...` entries as `ssh-keyscan -H` writes them) trusts `key` (the raw
/// public key blob the server presented) for `host:port`. Negated (`!host`)
/// and wildcard patterns are not matched.
pub fn trusts(known_hosts: &str, host: &str, port: u16, key: &[u8]) -> bool {
    let bracketed = format!("[{host}]:{port}");
    known_hosts.lines().any(|line| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('@') {
            return false;
        }
        let mut fields = line.split_whitespace();
        let (Some(hosts), Some(_keytype), Some(blob)) = (fields.next(), fields.next(), fields.next()) else {
            return false;
        };
        // A bare name means port 22; any other port is written `[host]:port`.
        let names = |name: &str| hosts.split(',').any(|h| h == name || hashed_names(h, name));
        let names_host = names(&bracketed) || (port == 22 && names(host));
        names_host && base64::engine::general_purpose::STANDARD.decode(blob).is_ok_and(|b| b == key)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20abcdefghijklmnopqrstuvwxyz012345";

    fn line(hosts: &str, key: &[u8]) -> String {
        format!("{hosts} ssh-ed25519 {}\n", base64::engine::general_purpose::STANDARD.encode(key))
    }

    #[test]
    fn only_the_named_host_with_exactly_that_key_is_trusted() {
        let kh = format!("# comment\n{}{}", line("github.com,140.82.121.4", KEY), line("[git.local]:2222", KEY));
        assert!(trusts(&kh, "github.com", 22, KEY));
        assert!(trusts(&kh, "140.82.121.4", 22, KEY));
        assert!(trusts(&kh, "git.local", 2222, KEY));
        assert!(!trusts(&kh, "git.local", 22, KEY), "the port is part of the name");
        assert!(!trusts(&kh, "gitlab.com", 22, KEY));
        assert!(!trusts(&kh, "github.com", 22, b"another key"));
        assert!(!trusts("", "github.com", 22, KEY), "no entry: fail closed");
        assert!(!trusts("|1|c2FsdA==|aGFzaA== ssh-ed25519 AAAA", "github.com", 22, KEY));
        assert_eq!(ssh_port("ssh://git@git.local:2222/org/repo.git"), 2222);
        assert_eq!(ssh_port("ssh://git.local/org/repo.git"), 22);
        assert_eq!(ssh_port("git@github.com:org/repo.git"), 22);
    }

    #[test]
    fn hashed_entries_as_ssh_keyscan_h_writes_them_are_read() {
        // `ssh-keygen -H` of a known_hosts naming `github.com` and
        // `[git.local]:2222` (OpenSSH 9): salt and HMAC-SHA1 per line.
        let kh = hashed_fixture();
        assert!(trusts(&kh, "github.com", 22, KEY));
        assert!(trusts(&kh, "git.local", 2222, KEY));
        assert!(!trusts(&kh, "git.local", 22, KEY));
        assert!(!trusts(&kh, "gitlab.com", 22, KEY));
        assert!(!trusts(&kh, "github.com", 22, b"another key"));
    }

    fn hashed_fixture() -> String {
        let blob = base64::engine::general_purpose::STANDARD.encode(KEY);
        format!(
            "|1|mjaXGNJ5HbDjXsNlwBpwyS1MSo4=|nlzV/cpkzLJSTDsxOWYeufIL3Hc= ssh-ed25519 {blob}\n\
             |1|0s+sSxeWjVPTuhJQRXA5C1+2qtM=|1wMGsekyJFNJPVfjGPweaKeBkrM= ssh-ed25519 {blob}\n"
        )
    }
}
