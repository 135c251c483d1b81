//! A real `sshd` on a free loopback port serving the repositories under a
//! directory over `ssh://` to one client key, as a forge does for SSH
//! remotes; `git-upload-pack` and `git-receive-pack` run on the far side.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::redis::free_port;

/// The Debian location of the daemon (package `openssh-server`).
const SSHD: &str = "/usr/sbin/sshd";

/// An `sshd` child process, killed on drop.
#[derive(Debug)]
pub struct SshGitServer {
    pub port: u16,
    /// The user the client logs in as (the one running the test).
    pub user: String,
    /// The server's host public key line (`ssh-ed25519 AAAA...`), for a
    /// `known_hosts` entry.
    pub host_key: String,
    /// The client's private key (OpenSSH PEM), authorized to log in.
    pub client_key: String,
    dir: tempfile::TempDir,
    child: Child,
}

fn keygen(path: &Path) -> std::io::Result<()> {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f"])
        .arg(path)
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        return Err(std::io::Error::other(format!("ssh-keygen failed for {}", path.display())));
    }
    Ok(())
}

impl SshGitServer {
    /// Starts `sshd` (refusing passwords, accepting one fresh client key).
    pub fn start() -> std::io::Result<Self> {
        if !Path::new(SSHD).is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{SSHD} is missing: install openssh-server (scripts/test does)"),
            ));
        }
        let dir = tempfile::tempdir()?;
        let d = dir.path();
        keygen(&d.join("host"))?;
        keygen(&d.join("client"))?;
        std::fs::copy(d.join("client.pub"), d.join("authorized_keys"))?;
        let port = free_port()?;
        let user = String::from_utf8_lossy(&Command::new("id").arg("-un").output()?.stdout).trim().to_owned();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {keys}\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
             PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nPidFile none\nLogLevel ERROR\n",
            host = d.join("host").display(),
            keys = d.join("authorized_keys").display(),
        );
        std::fs::write(d.join("sshd_config"), config)?;
        // sshd refuses to start without its privilege-separation directory.
        std::fs::create_dir_all("/run/sshd").ok();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("sshd.log"))?)
            .spawn()?;
        let host_key =
            std::fs::read_to_string(d.join("host.pub"))?.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        let client_key = std::fs::read_to_string(d.join("client"))?;
        let server = Self { port, user, host_key, client_key, dir, child };
        server.wait_listening()?;
        Ok(server)
    }

    fn wait_listening(&self) -> std::io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!("sshd never listened:\n{}", self.log())));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// `ssh://user@127.0.0.1:port/<path>` for a repository at `path`.
    pub fn url(&self, path: &Path) -> String {
        format!("ssh://{}@127.0.0.1:{}{}", self.user, self.port, path.display())
    }

    /// The `known_hosts` line for this server (`[127.0.0.1]:port <key>`).
    pub fn known_hosts(&self) -> String {
        format!("[127.0.0.1]:{} {}\n", self.port, self.host_key)
    }

    /// What sshd logged (errors only).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for SshGitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
