//! A throwaway certificate authority and a server certificate for `localhost` signed by
//! it, as PEM files in a folder of the test's; and a second CA that signed nothing (the
//! "unknown CA" a client must refuse).

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tempfile::TempDir;

pub struct TestCerts {
    /// The CA that signed the server certificate.
    pub ca: PathBuf,
    /// A CA that signed nothing here.
    pub other_ca: PathBuf,
    /// The server's certificate, for `localhost` only (not 127.0.0.1).
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    _dir: TempDir,
}

fn ca(name: &str) -> (CertificateParams, KeyPair, String) {
    let key = KeyPair::generate().expect("ca key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let pem = params.self_signed(&key).expect("self-sign the ca").pem();
    (params, key, pem)
}

impl TestCerts {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("certificate folder");
        let (ca_params, ca_key, ca_pem) = ca("quire test ca");
        let (_, _, other_pem) = ca("quire unknown ca");
        let server_key = KeyPair::generate().expect("server key");
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let issuer = Issuer::new(ca_params, ca_key);
        let server = params
            .signed_by(&server_key, &issuer)
            .expect("sign the server certificate");
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write a pem file");
            path
        };
        Self {
            ca: write("ca.pem", &ca_pem),
            other_ca: write("other-ca.pem", &other_pem),
            server_cert: write("server.pem", &server.pem()),
            server_key: write("server.key", &server_key.serialize_pem()),
            _dir: dir,
        }
    }
}
