//! The layer under tonic: a real gRPC server (`Server::builder().layer`,
//! HTTP/2) serving tonic-health's health service, the peer address given as
//! `PeerAddr` from tonic's `TcpConnectInfo`, a real tonic client, against a
//! real redis-server with the module.

mod common;

use std::time::Duration;

use librl_tower::{PeerAddr, Policy};
use tonic::service::InterceptorLayer;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Endpoint, Server};
use tonic::{Code, Request, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

#[tokio::test]
async fn limits_a_tonic_grpc_server() {
    let redis = common::redis();
    let limiter = common::limiter(&redis).build().unwrap();

    let (_reporter, health) = tonic_health::server::health_reporter();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // What a tonic user writes: the peer recorded (an interceptor reading
    // tonic's TcpConnectInfo), then the limiter, then the services.
    let server = Server::builder()
        .layer(InterceptorLayer::new(
            |mut req: Request<()>| -> Result<_, Status> {
                if let Some(peer) = req.remote_addr() {
                    req.extensions_mut().insert(PeerAddr(peer));
                }
                Ok(req)
            },
        ))
        .layer(limiter.layer([Policy::fixed("tonic", 2, Duration::from_secs(60))]))
        .add_service(health)
        .serve_with_incoming(TcpIncoming::from(listener));
    tokio::spawn(server);

    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = HealthClient::new(channel);
    let check = || {
        Request::new(HealthCheckRequest {
            service: String::new(),
        })
    };

    for _ in 0..2 {
        let response = client.check(check()).await.unwrap();
        assert_eq!(response.get_ref().status(), ServingStatus::Serving);
        // The layer's headers reach a gRPC client as response metadata.
        assert_eq!(
            response.metadata().get("ratelimit-policy").unwrap(),
            "\"tonic\";q=2;w=60"
        );
    }

    // The third call is refused by the layer before the service, the gRPC
    // way (docs/http.md, gRPC): a trailers-only response whose grpc-status
    // is RESOURCE_EXHAUSTED and whose grpc-message is the problem's detail.
    let refused = client.check(check()).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("Rate limit \"tonic\"")
            && refused.message().contains("retry in 60 s"),
        "{refused:?}"
    );
    // The refusal's rate-limit headers reach the client as the status's
    // metadata.
    assert_eq!(refused.metadata().get("retry-after").unwrap(), "60");
    assert_eq!(
        refused.metadata().get("ratelimit-policy").unwrap(),
        "\"tonic\";q=2;w=60"
    );
    assert_eq!(
        refused.metadata().get("ratelimit").unwrap(),
        "\"tonic\";r=0;t=60"
    );

    // Two admitted calls counted, the refused one not (docs/http.md, Keys).
    let mut con = common::conn(&redis);
    let reply: Vec<i64> = redis::cmd("RL.FIXED")
        .arg("rl:{ip:127.0.0.1}:tonic")
        .arg(2)
        .arg("60s")
        .arg("COST")
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert_eq!(reply[1], 2, "count in {reply:?}");
}
