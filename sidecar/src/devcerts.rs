//! Development certificates for the embedded default: a CA, a server
//! certificate for localhost, and a client certificate the CA signed (the
//! one `curl` presents, standing in for the API server). Generated once into
//! a directory and reused, so the printed `curl` keeps working across
//! restarts. Real deployments pass their own.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

pub struct DevCerts {
    pub dir: PathBuf,
}

impl DevCerts {
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
    pub fn server_cert(&self) -> PathBuf {
        self.dir.join("server.pem")
    }
    pub fn server_key(&self) -> PathBuf {
        self.dir.join("server-key.pem")
    }
    pub fn client_cert(&self) -> PathBuf {
        self.dir.join("client.pem")
    }
    pub fn client_key(&self) -> PathBuf {
        self.dir.join("client-key.pem")
    }
}

/// Writes one file 0600 whatever the umask: a certificate another user
/// could replace is a CA anyone could make the receiver trust.
fn write(path: &Path, contents: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(Error::io(format!("cannot write {}", path.display())))?;
    // `mode` applies only to a file it creates; an existing one is set here.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(Error::io(format!("cannot restrict {}", path.display())))?;
    f.write_all(contents.as_bytes()).map_err(Error::io(format!("cannot write {}", path.display())))
}

/// Refuses a directory or file that a group or other users may write: its
/// certificates could have been replaced.
fn refuse_writable_by_others(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode =
        std::fs::metadata(path).map_err(Error::io(format!("cannot read {}", path.display())))?.permissions().mode();
    if mode & 0o022 != 0 {
        return Err(Error::Tls(format!(
            "{} is writable by its group or by others (mode {:o}), so its certificates could have been replaced; \
             refusing to use them: chmod go-w it, or delete the directory to generate a new set",
            path.display(),
            mode & 0o777
        )));
    }
    Ok(())
}

/// Generates the set into `dir` unless a complete one is already there. The
/// directory is 0700 and every file 0600, whatever the umask; an existing
/// set that others may write is refused.
pub fn ensure(dir: &Path) -> Result<DevCerts> {
    let certs = DevCerts { dir: dir.to_path_buf() };
    let all = [certs.ca(), certs.server_cert(), certs.server_key(), certs.client_cert(), certs.client_key()];
    if all.iter().all(|p| p.is_file()) {
        refuse_writable_by_others(dir)?;
        for p in &all {
            refuse_writable_by_others(p)?;
        }
        return Ok(certs);
    }
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(Error::io(format!("cannot create {}", dir.display())))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(Error::io(format!("cannot restrict {}", dir.display())))?;
    }

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name.push(DnType::CommonName, "reverser development audit CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let server_key = KeyPair::generate()?;
    let mut server = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    server.distinguished_name.push(DnType::CommonName, "reverser audit receiver");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = server.signed_by(&server_key, &issuer)?;

    let client_key = KeyPair::generate()?;
    let mut client = CertificateParams::new(Vec::<String>::new())?;
    client.distinguished_name.push(DnType::CommonName, "kube-apiserver audit webhook (development)");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_cert = client.signed_by(&client_key, &issuer)?;

    write(&certs.ca(), &ca_cert.pem())?;
    write(&certs.server_cert(), &server_cert.pem())?;
    write(&certs.server_key(), &server_key.serialize_pem())?;
    write(&certs.client_cert(), &client_cert.pem())?;
    write(&certs.client_key(), &client_key.serialize_pem())?;
    Ok(certs)
}
