/// The units of a batch's work (`PageStore.maxBatchWork`, `[limits] batch_work`): what a mutation costs beyond
/// its own size, where that depends on what the store already holds. The weights make a unit about a
/// microsecond of the writer thread (a release build; docs/threat-model.md, "Work per batch", has the figures).
public enum BatchWork {
  /// A page walked up a tree (the depth and cycle check: one step of a recursive query).
  public static let perPage = 1
  /// A page whose height is computed again after a create or move (a query and an update).
  public static let perHeight = 3
  /// A block a placement reads or moves.
  public static let perBlock = 2
  /// A row of a database whose rows in view the batch may change: read (its view's properties decoded, the
  /// rows sorted) before the batch's first change to it and again after its last, so counted twice.
  public static let perDatabaseRow = 4
  /// Bytes of a block's stored text state and text that a text edit inflates, changes and deflates back, per
  /// unit.
  public static let textBytesPerUnit = 32
}
