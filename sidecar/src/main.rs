//! `reverser-sidecar`: the attribution sidecar.

fn main() {
    println!("reverser-sidecar: under construction");
}
