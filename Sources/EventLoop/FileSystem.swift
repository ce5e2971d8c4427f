#if canImport(Glibc)
  import Glibc
#endif

/// The few filesystem calls the programs make outside the loop (at start-up, before serving).
public enum FileSystem {
  /// Creates the directories above `path` (like `mkdir -p` of its parent), owner-only (0700) for those it makes.
  /// Throws a message naming the directory that could not be made and why.
  public static func makeParentDirectories(of path: String) throws(LoopError) {
    var components = path.split(separator: "/", omittingEmptySubsequences: false).dropLast()
    var current = path.hasPrefix("/") ? "" : "."
    if path.hasPrefix("/") { components = components.dropFirst() }
    for component in components where !component.isEmpty {
      current += "/" + component
      if mkdir(current, 0o700) != 0 && errno != EEXIST {
        throw LoopError(code: -errno, operation: "mkdir \(current)")
      }
    }
  }
}
