//! The server side of a TLS 1.3 handshake with rustls (ring provider), in
//! memory, to compare with the OpenSSL 3.0 handshake Throng's NIF runs
//! (bench/tls/handshake_cost.sh runs both). Server and client live in this
//! process and exchange their flights through buffers; only the server's
//! calls are timed (thread CPU time): reading the client's flight,
//! processing it, writing its own. The server is configured as Throng's:
//! TLS 1.3, stateless tickets (one per handshake), no session cache, the
//! server's suite order with AES-128-GCM first.
//!
//!   rustls_handshake PEM N full|resumed
//!
//! PEM holds the certificate and its private key (RSA or ECDSA).
use std::io::Read;
use std::sync::Arc;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, HandshakeKind, ServerConfig,
             ServerConnection, SignatureScheme};

/// The client trusts any certificate: the client's cost is not measured,
/// and the certificate is self-signed.
#[derive(Debug)]
struct AnyCert;
impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(&self, _: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: &ServerName<'_>,
                          _: &[u8], _: UnixTime) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(&self, _: &[u8], _: &CertificateDer<'_>, _: &DigitallySignedStruct)
                              -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(&self, _: &[u8], _: &CertificateDer<'_>, _: &DigitallySignedStruct)
                              -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider().signature_verification_algorithms.supported_schemes()
    }
}

#[repr(C)]
struct Timespec { tv_sec: i64, tv_nsec: i64 }
extern "C" { fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32; }
const CLOCK_THREAD_CPUTIME_ID: i32 = 3;

fn thread_us() -> f64 {
    let mut t = Timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e6 + t.tv_nsec as f64 / 1e3
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 || (args[3] != "full" && args[3] != "resumed") {
        eprintln!("usage: rustls_handshake PEM N full|resumed");
        std::process::exit(2);
    }
    let pem = std::fs::read(&args[1]).expect("PEM file");
    let n: usize = args[2].parse().expect("N");
    let resumed = args[3] == "resumed";
    let certs: Vec<CertificateDer> = rustls_pemfile::certs(&mut &pem[..]).map(|c| c.unwrap()).collect();
    let key: PrivateKeyDer = rustls_pemfile::private_key(&mut &pem[..]).unwrap().expect("a private key");
    // The server's order, as Throng's (AES-128-GCM first: its key schedule
    // hashes with SHA-256), whatever order the client lists them in.
    let mut ring = rustls::crypto::ring::default_provider();
    ring.cipher_suites.sort_by_key(|s| match s.suite() {
        rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 => 0,
        rustls::CipherSuite::TLS13_AES_256_GCM_SHA384 => 1,
        _ => 2,
    });
    let provider = Arc::new(ring);
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13]).unwrap()
        .with_no_client_auth().with_single_cert(certs, key).unwrap();
    server.ticketer = rustls::crypto::ring::Ticketer::new().unwrap();
    server.send_tls13_tickets = 1;
    server.ignore_client_order = true;
    server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    let server = Arc::new(server);
    let mut client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13]).unwrap()
        .dangerous().with_custom_certificate_verifier(Arc::new(AnyCert)).with_no_client_auth();
    if !resumed {
        client.resumption = rustls::client::Resumption::disabled();
    }
    let client = Arc::new(client);
    let (mut server_us, mut resumptions) = (0.0, 0);
    for _ in 0..n {
        let mut c = ClientConnection::new(client.clone(), "localhost".try_into().unwrap()).unwrap();
        let t = thread_us();
        let mut s = ServerConnection::new(server.clone()).unwrap();
        server_us += thread_us() - t;
        let mut flight = Vec::new();
        for _ in 0..10 {
            flight.clear();
            while c.wants_write() { c.write_tls(&mut flight).unwrap(); }
            let t = thread_us();
            let mut r = &flight[..];
            while !r.is_empty() { s.read_tls(&mut r).unwrap(); }
            s.process_new_packets().unwrap();
            let mut answer = Vec::new();
            while s.wants_write() { s.write_tls(&mut answer).unwrap(); }
            server_us += thread_us() - t;
            let mut r = &answer[..];
            while !r.is_empty() { c.read_tls(&mut r).unwrap(); }
            c.process_new_packets().unwrap();
            if !c.is_handshaking() && !s.is_handshaking() && !c.wants_write() { break; }
        }
        let mut none = [0u8; 1];
        let _ = c.reader().read(&mut none);      // the client takes its ticket
        if s.handshake_kind() == Some(HandshakeKind::Resumed) { resumptions += 1; }
        let t = thread_us();
        drop(s);
        server_us += thread_us() - t;
    }
    println!("rustls {} {}: server CPU {:.1} us per handshake ({} of {} resumed)",
             args[1], args[3], server_us / n as f64, resumptions, n);
}
