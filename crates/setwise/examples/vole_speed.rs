//! The `vole` protocol alone, for profiling: both roles in one process over the
//! in-memory channel on 16-byte items (2^LOG each, half common), REPS times.
//! `cargo run --release -p setwise --example vole-speed -- 20 3`.

use setwise::net::MemoryChannel;
use setwise::{Input, Job, Operation, Outcome, Protocol, Role, run};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let log_n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let n = 1u64 << log_n;
    let x: Vec<[u8; 16]> = (0..n).map(|i| (u128::from(i) * 3).to_le_bytes()).collect();
    let y: Vec<[u8; 16]> = (0..n).map(|i| (u128::from(i + n / 2) * 3).to_le_bytes()).collect();
    let job = Job::new(Protocol::Vole, Operation::Intersection);
    for _ in 0..reps {
        let (mut a, mut b) = MemoryChannel::pair(1 << 30);
        let t = Instant::now();
        let (s, r) = std::thread::scope(|sc| {
            let s = sc.spawn(|| run(&mut a, &job, Role::Sender, Input::Items(&x)));
            let r = run(&mut b, &job, Role::Receiver, Input::Items(&y));
            (s.join().unwrap().unwrap(), r.unwrap())
        });
        let took = t.elapsed().as_secs_f64();
        let Outcome::Intersection(found) = &r.0 else { panic!("outcome") };
        assert_eq!(found.len() as u64, n / 2);
        let phases = |rep: &setwise::Report| {
            rep.phases.iter().map(|p| format!("{} {:.0}", p.name, p.wall_ms)).collect::<Vec<_>>().join(", ")
        };
        println!("2^{log_n}: {took:.3} s\n  sender: {}\n  receiver: {}", phases(&s.1), phases(&r.1));
    }
}
