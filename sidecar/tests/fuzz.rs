//! Bad input never crashes the process: truncated, oversized and random
//! audit bodies, and malformed protobufs on every method; afterwards the
//! sidecar still answers correctly. Deterministic (seeded) so a failure
//! reproduces.

mod support;

use bytes::{Buf, BufMut};
use runtime::proto::ResolveRequest;
use support::*;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;

/// xorshift64*: enough randomness for inputs, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Sends raw bytes as a gRPC message, so malformed protobufs reach the server.
#[derive(Debug, Clone, Default)]
struct RawCodec;
impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }
    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}
impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}
impl Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        let v = src.chunk().to_vec();
        src.advance(v.len());
        Ok(Some(v))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_never_crashes_and_answers_stay_correct() {
    let mut s = Sidecar::start("serve", &["--audit-body-limit", "65536"]);
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let valid = event_list(
        (0..20).map(|i| audit_event("update", "alice", "ns", &format!("cm{i}"), &format!("u{i}"), "7")).collect(),
    );

    // Audit bodies: truncated, random, wrong-shaped, oversized.
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    for _ in 0..40 {
        bodies.push(valid[..rng.below(valid.len())].to_vec());
    }
    for _ in 0..40 {
        let n = rng.below(4096);
        bodies.push(rng.bytes(n));
    }
    for shape in [
        r#"{"items": 5}"#,
        r#"{"items": [{"verb": 7, "objectRef": "x"}]}"#,
        r#"{"items": [{"stage": "ResponseComplete", "verb": "create", "objectRef": {"resource": "configmaps", "resourceVersion": {"x": 1}}}]}"#,
        r#"[]"#,
        r#"null"#,
        "\u{feff}{}",
    ] {
        bodies.push(shape.as_bytes().to_vec());
    }
    bodies.push(vec![b'['; 70_000]);
    for body in &bodies {
        let (code, text) = s.post("/audit-webhook/lab", body);
        assert!(matches!(code, 200 | 400 | 413), "status {code} ({text}) for a {}-byte body", body.len());
    }

    // Malformed protobufs on every method, and well-formed ones with bad content.
    let mut grpc = tonic::client::Grpc::new(channel(&s.socket).await);
    for method in ["Resolve", "Explain", "Acquire", "Release"] {
        let path = format!("/reverser.v1.Attribution/{method}");
        for _ in 0..30 {
            grpc.ready().await.unwrap();
            let n = rng.below(512);
            let msg = rng.bytes(n);
            let r =
                grpc.unary(tonic::Request::new(msg), PathAndQuery::try_from(path.as_str()).unwrap(), RawCodec).await;
            if let Err(status) = r {
                assert_ne!(status.code(), tonic::Code::Unavailable, "{method}: the server went away: {status}");
            }
        }
    }
    let mut c = s.client().await;
    for (event_type, object) in
        [("RENAMED", b"{}".to_vec()), ("ADDED", b"{not json".to_vec()), ("MODIFIED", b"[1,2]".to_vec())]
    {
        let r = c
            .resolve(ResolveRequest { r#type: configmaps("lab"), event_type: event_type.into(), object_json: object })
            .await;
        if let Err(status) = &r {
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status}");
        }
    }
    let r = c.resolve(ResolveRequest { r#type: None, event_type: "ADDED".into(), object_json: b"{}".to_vec() }).await;
    assert_eq!(r.unwrap_err().code(), tonic::Code::InvalidArgument);

    // Still alive, and still right.
    assert!(s.child.as_mut().unwrap().try_wait().unwrap().is_none(), "the process exited");
    assert_eq!(s.post("/audit-webhook/lab", &valid).0, 200);
    let r = c
        .resolve(ResolveRequest {
            r#type: configmaps("lab"),
            event_type: "MODIFIED".into(),
            object_json: watch_object("ns", "cm3", "u3", "7", false),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.tier.as_str(), r.author.as_str()), ("exact", "alice"));
    assert!(http_get(s.metrics_port, "/healthz").contains("ok"));
}

/// A request that is no valid protobuf is the caller's mistake:
/// INVALID_ARGUMENT on every method, never INTERNAL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_protobuf_is_invalid_argument() {
    let s = Sidecar::start("serve", &[]);
    let mut grpc = tonic::client::Grpc::new(channel(&s.socket).await);
    // Field 1, length-delimited, 255 bytes announced, 1 sent.
    for method in ["Resolve", "Explain", "Commit", "Acquire", "Release"] {
        grpc.ready().await.unwrap();
        let path = PathAndQuery::try_from(format!("/reverser.v1.Attribution/{method}")).unwrap();
        let status = grpc.unary(tonic::Request::new(vec![0x0a, 0xff, 0x01, 0x00]), path, RawCodec).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{method}: {status}");
        assert!(status.message().contains("not a valid protobuf"), "{method}: {status}");
    }
}
