//! Generates the `reverser.v1` gRPC code (feature `grpc`) with a vendored
//! `protoc`, so the build needs nothing a fresh machine lacks. Without the
//! feature nothing is generated and no codegen crate is compiled.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "grpc")]
    {
        let protoc = protoc_bin_vendored::protoc_bin_path()?;
        // Hand protoc to prost-build through its config (setting PROTOC in the
        // environment would need `unsafe` in edition 2024).
        let mut config = tonic_prost_build::Config::new();
        config.protoc_executable(protoc);
        // The codec maps a request that is no valid protobuf to
        // INVALID_ARGUMENT (the caller's fault), not INTERNAL.
        tonic_prost_build::configure()
            .build_server(true)
            .build_client(true)
            .codec_path("crate::proto::codec::Codec")
            .compile_with_config(config, &["proto/reverser/v1/reverser.proto"], &["proto"])?;
    }
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
