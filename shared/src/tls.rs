//! rustls, set up once for every TLS link Quire makes or serves: the *ring* provider,
//! root stores from a CA file or the system store, a server certificate and key from
//! PEM files, and the two verifiers libpq's `sslmode` asks for that rustls does not
//! ship (encrypt without verifying; verify the chain but not the host name).
//!
//! Which link uses which is decided by its owner: `db::connect` (PostgreSQL's
//! `sslmode`), `redis_client` (`rediss://` with `redis.ca_file`), the API's listener
//! (`server.tls_cert`/`server.tls_key`) and `quire-admin` (`--api-ca-file`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{} holds no PEM certificate", .0.display())]
    NoCertificate(PathBuf),
    #[error("the system certificate store has no usable certificate")]
    NoSystemRoots,
    #[error("tls configuration refused: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("tls verifier refused the root store: {0}")]
    Verifier(#[from] rustls::client::VerifierBuilderError),
}

/// The one crypto provider. Installed as the process default too, for the crates that
/// build their own configuration from it (the redis crate).
pub fn provider() -> Arc<CryptoProvider> {
    // Fails only when a default is installed already: this same provider, or one a
    // caller chose on purpose.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM file (a CA bundle, a server's chain).
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let read = |source| TlsError::Read {
        path: path.to_owned(),
        source,
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(read)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)?;
    if certificates.is_empty() {
        return Err(TlsError::NoCertificate(path.to_owned()));
    }
    Ok(certificates)
}

/// A root store holding the CA certificates of `path`.
pub fn roots_from_file(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for certificate in read_certificates(path)? {
        roots.add(certificate)?;
    }
    Ok(roots)
}

/// The system's root store (`SSL_CERT_FILE`/`SSL_CERT_DIR` honoured).
pub fn system_roots() -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    let (added, _) =
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if added == 0 {
        return Err(TlsError::NoSystemRoots);
    }
    Ok(roots)
}

/// How a client checks the server's certificate.
#[derive(Debug, Clone)]
pub enum Verification {
    /// Encrypt, verify nothing: a passive eavesdropper learns nothing, an active man in
    /// the middle is not stopped (libpq's `prefer` and `require` without a root).
    None,
    /// The chain must end at one of these roots; any host name is accepted
    /// (`verify-ca`).
    Chain(Arc<RootCertStore>),
    /// The chain must end at one of these roots and name the host (`verify-full`).
    Full(Arc<RootCertStore>),
}

/// A client configuration that verifies as `verification` says.
pub fn client_config(verification: &Verification) -> Result<ClientConfig, TlsError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?;
    let config = match verification {
        Verification::Full(roots) => builder
            .with_root_certificates(Arc::clone(roots))
            .with_no_client_auth(),
        Verification::Chain(roots) => {
            let inner =
                WebPkiServerVerifier::builder_with_provider(Arc::clone(roots), provider).build()?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly { inner }))
                .with_no_client_auth()
        }
        Verification::None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification {
                algorithms: provider.signature_verification_algorithms,
            }))
            .with_no_client_auth(),
    };
    Ok(config)
}

/// A server configuration from a PEM certificate chain and its PEM private key.
pub fn server_config(cert: &Path, key: &Path) -> Result<ServerConfig, TlsError> {
    let chain = read_certificates(cert)?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Read {
        path: key.to_owned(),
        source,
    })?;
    Ok(ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?)
}

/// Accepts any certificate but still checks that the server holds its key (the
/// handshake signature), so the session is encrypted to whoever answered.
#[derive(Debug)]
struct NoVerification {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The web PKI verifier with one answer overruled: a certificate that is valid but
/// names another host passes (`verify-ca`). Every other failure stands.
#[derive(Debug)]
struct ChainOnly {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
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

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
