import SeededRandom

/// SplitMix64 for seeded random tests (a failing case replays from its seed): the load harness's generator,
/// under the name every test target knows.
public typealias SplitMix64 = SeededRandom.SplitMix64
