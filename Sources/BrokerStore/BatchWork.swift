/// The units of a batch's work (`PageStore.maxBatchWork`, `[limits] batch_work`): what a mutation costs beyond
/// its own size, where that depends on what the store already holds. Each weight makes a unit about a
/// microsecond of the writer thread (a release build; docs/threat-model.md, "Work per batch", has the figures).
public enum BatchWork {
  /// A page walked up a tree (the depth and cycle check) or whose height is refreshed.
  public static let perPage = 1
  /// A block a placement reads or moves.
  public static let perBlock = 1
  /// A row of a database whose rows in view the batch may change: read before the batch's first change to it
  /// and again after its last (so counted twice).
  public static let perDatabaseRow = 1
  /// Bytes of a block's stored text state a text edit reads, changes and writes back, per unit.
  public static let textBytesPerUnit = 16
}
