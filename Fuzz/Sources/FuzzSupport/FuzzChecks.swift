#if canImport(Glibc)
  import Glibc
#endif

/// Stops the run with `message` when a target's property does not hold: libFuzzer reports the crash and keeps
/// the input in `fuzz-artifacts/`.
public func require(
  _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
  file: StaticString = #fileID, line: UInt = #line
) {
  guard !condition() else { return }
  preconditionFailure("property violated: \(message())", file: file, line: line)
}

/// A fresh directory for a target's files, on tmpfs when the machine has one (SQLite's fsyncs cost nothing
/// there, so edits run at the fuzzer's pace), else under /tmp. The caller removes it at exit with
/// `removeDirectory`; a run stopped by a finding leaves it, to be looked at.
public func temporaryDirectory(_ name: String) -> String {
  let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
  var template = Array("\(base)/pagesync-\(name)-XXXXXX".utf8CString)
  let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
  precondition(made != nil, "cannot make a directory under \(base): \(String(cString: strerror(errno)))")
  return String(cString: made!)
}

/// Removes `directory` and what is in it (one level: the targets make no subdirectories).
public func removeDirectory(_ directory: String) {
  guard let dir = opendir(directory) else { return }
  while let entry = readdir(dir) {
    let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
      String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
    }
    if name != "." && name != ".." { unlink("\(directory)/\(name)") }
  }
  closedir(dir)
  rmdir(directory)
}
