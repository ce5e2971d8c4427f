#if canImport(Glibc)
  import Glibc
#endif

extension ConfigReader {
  /// Reads and parses the configuration file at `path`; an unreadable file is a `ConfigError` naming it and why.
  public convenience init(contentsOf path: String) throws(ConfigError) {
    guard let file = fopen(path, "rb") else {
      throw ConfigError(
        file: path, line: nil, key: "", message: "cannot read the file: \(String(cString: strerror(errno)))")
    }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = fread(&chunk, 1, chunk.count, file)
      if count > 0 { bytes.append(contentsOf: chunk[0..<count]) }
      if count < chunk.count { break }
    }
    try self.init(text: String(decoding: bytes, as: UTF8.self), file: path)
  }
}
