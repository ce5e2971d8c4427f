import CMallocInfo
import Glibc
import Testing

/// What `SyncDriver.returnMemory` asks of the kernel for the code it mapped: a read-only private mapping of a
/// file whose pages this process alone maps is no longer resident afterwards (Linux 5.4 and later).
@Suite struct PageOutTests {
  @Test func theResidentPagesOfAReadOnlyFileMappingAreReclaimed() throws {
    var template = Array("/tmp/pagesync-pageout-XXXXXX".utf8CString)
    let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    try #require(descriptor >= 0)
    defer {
      close(descriptor)
      template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
    }
    let size = 1 << 20
    let bytes = [UInt8](repeating: 7, count: size)
    #expect(bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, size) } == size)
    #expect(fsync(descriptor) == 0, "clean pages: a dirty one would have to be written first")
    let mapping = try #require(mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, 0))
    try #require(mapping != MAP_FAILED)
    defer { munmap(mapping, size) }
    let pages = mapping.assumingMemoryBound(to: UInt8.self)
    // Touched until every page is resident at once: the daemons and brokers of tests running beside this one give
    // their memory back in this same process, and their page-out reclaims this mapping too (it did under
    // ThreadSanitizer, between the touch and the count).
    var before = 0
    for _ in 0..<20 where before < size / 1024 {
      var sum = 0
      for offset in stride(from: 0, to: size, by: 4096) { sum += Int(pages[offset]) }
      #expect(sum == 7 * size / 4096)
      before = try #require(Self.residentKilobytes(of: mapping))
    }
    #expect(before == size / 1024, "every page touched is resident")

    #expect(pagesync_page_out_file_mappings() > 0)

    let after = try #require(Self.residentKilobytes(of: mapping))
    #expect(after < before / 8, "\(after) kB of \(before) kB still resident")
  }

  /// The `Rss:` of the mapping that starts at `address`, from /proc/self/smaps.
  static func residentKilobytes(of address: UnsafeMutableRawPointer) -> Int? {
    guard let file = fopen("/proc/self/smaps", "r") else { return nil }
    defer { fclose(file) }
    let start = String(UInt(bitPattern: address), radix: 16)
    var line = [CChar](repeating: 0, count: 4352)
    var inMapping = false
    while fgets(&line, Int32(line.count), file) != nil {
      let text = String(cString: line)
      if let dash = text.firstIndex(of: "-"), let space = text.firstIndex(of: " "), dash < space {
        inMapping = text[..<dash] == start
      } else if inMapping && text.hasPrefix("Rss:") {
        return text.dropFirst(4).split(separator: " ").first.flatMap { Int($0) }
      }
    }
    return nil
  }
}
