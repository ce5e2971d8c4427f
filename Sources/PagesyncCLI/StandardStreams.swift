#if canImport(Glibc)
  import Glibc
#endif

/// Writes `text` to standard error with write(2): unbuffered, and without the C `stderr` global, which Swift
/// 6 refuses as shared mutable state.
func writeStandardError(_ text: String) {
  writeAll(2, Array(text.utf8))
}

/// Writes `bytes` to standard output with write(2): at once, so a line reaches a pipe as soon as it is written
/// (`print` buffers; the two are never mixed in one command). Returns false when the bytes could not all be
/// written (EPIPE: the reader went away).
@discardableResult
func writeStandardOutput(_ bytes: [UInt8]) -> Bool {
  writeAll(1, bytes)
}

@discardableResult
private func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
  bytes.withUnsafeBytes { raw in
    var offset = 0
    while offset < raw.count {
      let written = write(descriptor, raw.baseAddress! + offset, raw.count - offset)
      if written < 0 {
        if errno == EINTR { continue }
        return false  // EPIPE (a reader that went away) and the like: nobody is left to tell.
      }
      offset += written
    }
    return true
  }
}
