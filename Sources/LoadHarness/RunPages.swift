/// A run's pages: `count` pages named `PREFIX-INDEX` (a run nonce in the prefix keeps re-runs against one broker
/// apart); the index is read back from a notification's id without a dictionary.
struct RunPages {
  let prefix: String
  let count: Int

  func id(_ index: Int) -> String { "\(prefix)-\(index)" }

  /// Every page's id, by index.
  var ids: [String] { (0..<count).map(id) }

  /// The index of `id`, nil for a page of another run.
  func index(of id: Substring) -> Int? {
    guard id.hasPrefix(prefix), let dash = id.lastIndex(of: "-"),
      let index = Int(id[id.index(after: dash)...]),
      index >= 0, index < count
    else { return nil }
    return index
  }
}
