//! Generates the gRPC code of `proto/agentprocess/run/v1/run.proto` (needs `protoc`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure().compile_protos(&["proto/agentprocess/run/v1/run.proto"], &["proto"])?;
    Ok(())
}
