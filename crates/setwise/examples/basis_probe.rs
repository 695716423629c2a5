fn main() {
    let max: u32 = std::env::args().nth(1).unwrap().parse().unwrap();
    let r: u32 = std::env::args().nth(2).unwrap().parse().unwrap();
    let t = std::time::Instant::now();
    let s = setwise::he::depth_one_sources(max, r);
    println!("{} {:?} {:?}", s.len(), s, t.elapsed());
}
