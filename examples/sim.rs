//! Runs `shardis::sim` standalone: `cargo run --release --example sim -- --keys 1e9 --add 1`.
//! Same flags as `shardis sim`; handy before the subcommand is wired or for profiling.

use clap::Parser;

#[derive(Parser)]
#[command(about = "shardis distribution simulator")]
struct Cli {
    #[command(flatten)]
    sim: shardis::sim::SimArgs,
}

fn main() {
    let cli = Cli::parse();
    let mut out = std::io::stdout().lock();
    if let Err(e) = shardis::sim::run(&cli.sim, &mut out) {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}
