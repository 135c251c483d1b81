//! The sidecar's Unix-socket API (`reverser.v1`), generated from
//! `proto/reverser/v1/reverser.proto`, and conversions between it and the
//! rules' plain data.

#![allow(clippy::all, missing_docs, rust_2018_idioms)]

tonic::include_proto!("reverser.v1");

use std::path::Path;

/// The gRPC metadata key of a Commit or Reconcile refused because the
/// target's folder is (FAILED_PRECONDITION): the GitTarget's
/// `GitPathAccepted` reason (`UnsupportedContent`, `IgnoreShadowsManagedPath`,
/// `WriteBoundaryRefused`); the status message is the condition's message.
pub const GIT_PATH_REFUSED: &str = "reverser-git-path-refused";

pub mod codec {
    //! prost's codec, except for what a malformed message is: a request that
    //! is no valid protobuf is the caller's mistake, so the server answers
    //! INVALID_ARGUMENT (tonic-prost says INTERNAL, which reads as ours).

    use std::marker::PhantomData;

    use tonic::codec::{BufferSettings, DecodeBuf};
    use tonic::{Code, Status};
    use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

    #[derive(Debug, Clone)]
    pub struct Codec<T, U>(PhantomData<(T, U)>);

    impl<T, U> Default for Codec<T, U> {
        fn default() -> Self {
            Self(PhantomData)
        }
    }

    impl<T, U> tonic::codec::Codec for Codec<T, U>
    where
        T: prost::Message + Send + 'static,
        U: prost::Message + Default + Send + 'static,
    {
        type Encode = T;
        type Decode = U;
        type Encoder = ProstEncoder<T>;
        type Decoder = Decoder<U>;

        fn encoder(&mut self) -> Self::Encoder {
            ProstCodec::<T, U>::default().encoder()
        }

        fn decoder(&mut self) -> Self::Decoder {
            Decoder(ProstDecoder::default())
        }
    }

    #[derive(Debug)]
    pub struct Decoder<U>(ProstDecoder<U>);

    impl<U: prost::Message + Default> tonic::codec::Decoder for Decoder<U> {
        type Item = U;
        type Error = Status;

        fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
            self.0.decode(buf).map_err(|s| {
                if s.code() == Code::Internal {
                    Status::invalid_argument(format!("the message is not a valid protobuf encoding: {}", s.message()))
                } else {
                    s
                }
            })
        }

        fn buffer_settings(&self) -> BufferSettings {
            self.0.buffer_settings()
        }
    }
}

use rules::attribution::Fact as WireFact;
use rules::attribution::grace::GraceView;
use rules::attribution::index::StoredFact;
use rules::attribution::why::explanation::{parse_labels, parse_tier};
use rules::attribution::why::{CandidateView, EvidenceFact, ExplainParams, Explanation, RouteHealthView};

impl From<&StoredFact> for Fact {
    fn from(s: &StoredFact) -> Self {
        wire_to_proto(s.fact.clone(), s.at_ms)
    }
}

/// Moves the fact's strings into the message (a `Resolve` answer owns the
/// fact the index handed out: no second copy).
impl From<StoredFact> for Fact {
    fn from(s: StoredFact) -> Self {
        let StoredFact { fact, at_ms, .. } = s;
        wire_to_proto(fact, at_ms)
    }
}

fn fact_from_proto(f: Fact) -> EvidenceFact {
    EvidenceFact {
        fact: WireFact {
            author: f.author,
            namespace: f.namespace,
            name: f.name,
            uid: f.uid,
            resource_version: f.resource_version,
            display_name: f.display_name,
            email: f.email,
            verb: f.verb,
            audit_id: f.audit_id,
            stage_timestamp: f.stage_timestamp,
            label_selector: f.label_selector,
            uids: f.has_uids.then_some(f.uids),
        },
        appended_at_ms: f.appended_at_ms,
    }
}

fn fact_to_proto(f: &EvidenceFact) -> Fact {
    wire_to_proto(f.fact.clone(), f.appended_at_ms)
}

fn wire_to_proto(x: WireFact, appended_at_ms: u64) -> Fact {
    Fact {
        author: x.author,
        namespace: x.namespace,
        name: x.name,
        uid: x.uid,
        resource_version: x.resource_version,
        display_name: x.display_name,
        email: x.email,
        verb: x.verb,
        audit_id: x.audit_id,
        stage_timestamp: x.stage_timestamp,
        label_selector: x.label_selector,
        has_uids: x.uids.is_some(),
        uids: x.uids.unwrap_or_default(),
        appended_at_ms,
    }
}

impl TryFrom<ExplainResponse> for Explanation {
    type Error = rules::Error;

    fn try_from(r: ExplainResponse) -> Result<Self, rules::Error> {
        let candidates = r
            .candidates
            .into_iter()
            .map(|c| {
                Ok(CandidateView {
                    tier: parse_tier(&c.tier)?,
                    asserts: c.asserts,
                    fact: fact_from_proto(c.fact.unwrap_or_default()),
                    wins: c.wins,
                    excluded: (!c.excluded.is_empty()).then_some(c.excluded),
                })
            })
            .collect::<Result<_, rules::Error>>()?;
        Ok(Self {
            winner_tier: parse_tier(&r.winner_tier)?,
            settled: r.settled,
            candidates,
            route: r.route.map(|h| RouteHealthView {
                ever_resolved: h.ever_resolved,
                unresolved_in_a_row: h.unresolved_in_a_row,
                misrouted: h.misrouted,
            }),
            following: r.following,
            follower_last_success: r.follower_last_success,
            facts_for_type: r.facts_for_type,
            grace: r.grace.map(|g| GraceView {
                misses_in_a_row: g.misses_in_a_row,
                after_misses: g.after_misses,
                skipping: g.skipping,
            }),
        })
    }
}

impl From<&Explanation> for ExplainResponse {
    fn from(e: &Explanation) -> Self {
        ExplainResponse {
            winner_tier: e.winner_tier.label().into(),
            settled: e.settled,
            candidates: e
                .candidates
                .iter()
                .map(|c| Candidate {
                    tier: c.tier.label().into(),
                    asserts: c.asserts.clone(),
                    fact: Some(fact_to_proto(&c.fact)),
                    wins: c.wins,
                    excluded: c.excluded.clone().unwrap_or_default(),
                })
                .collect(),
            route: e.route.map(|h| RouteHealth {
                ever_resolved: h.ever_resolved,
                unresolved_in_a_row: h.unresolved_in_a_row,
                misrouted: h.misrouted,
            }),
            following: e.following,
            follower_last_success: e.follower_last_success,
            facts_for_type: e.facts_for_type,
            grace: e.grace.map(|g| AdaptiveGrace {
                misses_in_a_row: g.misses_in_a_row,
                after_misses: g.after_misses,
                skipping: g.skipping,
            }),
        }
    }
}

impl From<&ExplainParams> for ExplainRequest {
    /// The gRPC request asking what the `GET /v1/explain` parameters ask.
    fn from(p: &ExplainParams) -> Self {
        ExplainRequest {
            r#type: Some(TypeRef {
                route: p.route.clone(),
                group: p.group.clone(),
                version: p.version.clone(),
                resource: p.resource.clone(),
            }),
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            uid: p.uid.clone(),
            resource_version: p.resource_version.clone(),
            removal: p.removal,
            labels: parse_labels(&p.labels).into_iter().collect(),
            follow: false,
            creation_timestamp: p.creation_timestamp.clone(),
        }
    }
}

/// A gRPC channel to the sidecar's Unix socket (the watcher's and `kubectl
/// reverser why`'s way in). The authority is a placeholder; the socket path
/// is what connects.
pub async fn connect_unix(socket: &Path) -> Result<tonic::transport::Channel, tonic::transport::Error> {
    use hyper_util::rt::TokioIo;
    use tonic::transport::{Endpoint, Uri};
    let path = socket.to_path_buf();
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let p = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(p).await?)) }
        }))
        .await
}
