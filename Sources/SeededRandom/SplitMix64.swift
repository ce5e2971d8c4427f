/// SplitMix64 (Steele, Lea, Flood 2014): a small, fast, seedable generator. The one copy for everything that
/// must replay from a seed: the load harness's workloads (the same `--seed` makes the same workload) and the
/// seeded random tests (a failing case replays from its seed; EventLoopTestKit names it for them).
public struct SplitMix64: RandomNumberGenerator, Sendable {
  private var state: UInt64

  public init(seed: UInt64) { state = seed }

  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// `count` distinct indices of `0..<population`, in increasing order (a partial Fisher–Yates shuffle).
  public mutating func choose(_ count: Int, of population: Int) -> [Int] {
    precondition(count >= 0 && count <= population, "cannot choose \(count) of \(population)")
    var pool = Array(0..<population)
    for index in 0..<count {
      let pick = index + Int(next(upperBound: UInt64(population - index)))
      pool.swapAt(index, pick)
    }
    return pool[0..<count].sorted()
  }
}
