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

fn write(path: &Path, contents: &str, private: bool) -> Result<()> {
    std::fs::write(path, contents).map_err(Error::io(format!("cannot write {}", path.display())))?;
    if private {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(Error::io(format!("cannot restrict {}", path.display())))?;
    }
    Ok(())
}

/// Generates the set into `dir` unless a complete one is already there.
pub fn ensure(dir: &Path) -> Result<DevCerts> {
    let certs = DevCerts { dir: dir.to_path_buf() };
    let all = [certs.ca(), certs.server_cert(), certs.server_key(), certs.client_cert(), certs.client_key()];
    if all.iter().all(|p| p.is_file()) {
        return Ok(certs);
    }
    std::fs::create_dir_all(dir).map_err(Error::io(format!("cannot create {}", dir.display())))?;

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

    write(&certs.ca(), &ca_cert.pem(), false)?;
    write(&certs.server_cert(), &server_cert.pem(), false)?;
    write(&certs.server_key(), &server_key.serialize_pem(), true)?;
    write(&certs.client_cert(), &client_cert.pem(), false)?;
    write(&certs.client_key(), &client_key.serialize_pem(), true)?;
    Ok(certs)
}
