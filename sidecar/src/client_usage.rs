//! The audit client certificate's purposes (issue 30): webpki checks the
//! chain, the validity and an extended key usage when one is present, but
//! not the keyUsage extension, so an audit-CA-signed certificate with
//! `keyEncipherment` only was accepted. A client certificate must say it
//! may sign (a TLS client proves its key by a signature) and that it is for
//! client authentication.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};

/// The audit CA's verifier, then the purposes it leaves unchecked.
#[derive(Debug)]
pub struct ClientUsage {
    inner: Arc<dyn ClientCertVerifier>,
}

impl ClientUsage {
    pub fn new(inner: Arc<dyn ClientCertVerifier>) -> Arc<Self> {
        Arc::new(Self { inner })
    }
}

/// Whether a client certificate (DER) may authenticate a TLS client: a
/// keyUsage, when present, includes digitalSignature, and an extended key
/// usage is present and includes clientAuth.
pub fn check(der: &[u8]) -> Result<(), CertificateError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|_| CertificateError::BadEncoding)?;
    match cert.key_usage() {
        Ok(Some(ku)) if !ku.value.digital_signature() => return Err(CertificateError::InvalidPurpose),
        Ok(_) => {}
        Err(_) => return Err(CertificateError::BadEncoding),
    }
    match cert.extended_key_usage() {
        Ok(Some(eku)) if eku.value.client_auth => Ok(()),
        Ok(_) => Err(CertificateError::InvalidPurpose),
        Err(_) => Err(CertificateError::BadEncoding),
    }
}

impl ClientCertVerifier for ClientUsage {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self.inner.verify_client_cert(end_entity, intermediates, now)?;
        check(end_entity).map_err(rustls::Error::InvalidCertificate)?;
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, KeyPair, KeyUsagePurpose};

    use super::*;

    fn cert(ku: &[KeyUsagePurpose], eku: &[ExtendedKeyUsagePurpose]) -> Vec<u8> {
        let mut p = CertificateParams::new(vec!["audit-client".into()]).unwrap();
        p.key_usages = ku.to_vec();
        p.extended_key_usages = eku.to_vec();
        p.self_signed(&KeyPair::generate().unwrap()).unwrap().der().to_vec()
    }

    #[test]
    fn a_client_certificate_must_sign_and_be_for_client_auth() {
        use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        use KeyUsagePurpose::{DigitalSignature, KeyEncipherment};
        assert_eq!(check(&cert(&[DigitalSignature, KeyEncipherment], &[ClientAuth])), Ok(()));
        // No keyUsage extension: no restriction (RFC 5280), as the dev certificates.
        assert_eq!(check(&cert(&[], &[ClientAuth])), Ok(()));
        // The probe's certificate: keyEncipherment only.
        assert_eq!(check(&cert(&[KeyEncipherment], &[ClientAuth])), Err(CertificateError::InvalidPurpose));
        assert_eq!(check(&cert(&[DigitalSignature], &[])), Err(CertificateError::InvalidPurpose));
        assert_eq!(check(&cert(&[DigitalSignature], &[ServerAuth])), Err(CertificateError::InvalidPurpose));
        assert_eq!(check(b"not a certificate"), Err(CertificateError::BadEncoding));
    }
}
