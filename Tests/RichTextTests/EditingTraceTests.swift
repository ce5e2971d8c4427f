import Foundation
import RichText
import Testing

/// Real editing histories (josephg/editing-traces, CC BY 4.0; see shared/data/editing-traces/README.md)
/// replayed through replicas: every one must end on the trace's final text.
@Suite struct EditingTraceTests {
  /// `automerge-paper` (259,778 single-character edits) and `seph-blog1` (edits of every size), each edit a
  /// splice on one replica.
  @Test(arguments: ["automerge-paper", "seph-blog1"])
  func sequentialTraceEndsOnItsText(name: String) throws {
    let trace = try EditingTraces.load(name, as: SequentialTrace.self)
    var document = TextDocument(text: trace.startContent, client: "start")
    var edits = 0
    for transaction in trace.txns {
      for patch in transaction.patches {
        _ = try document.splice(
          at: patch.position, delete: patch.delete, insert: patch.insert, client: "author")
        edits += 1
      }
    }
    #expect(edits > 100_000)
    #expect(document.scalars == Array(trace.endContent.unicodeScalars))
    let decoded = try TextDocument(encoded: document.encoded())
    #expect(decoded.scalars == document.scalars)
    var fresh = TextDocument()
    fresh.apply(document.update())
    #expect(fresh.scalars == document.scalars)
  }

  /// `clownschool` and `friendsforever`: transactions typed on branches (`parents` name the versions each was
  /// typed against). Each transaction forks the replica of its first parent and merges in what the other
  /// parents have that it lacks (the updates of those transactions, in order, as a sync would bring them),
  /// then makes its edits as its agent; the heads merged end on the final text.
  @Test(arguments: ["clownschool", "friendsforever"])
  func concurrentTraceEndsOnItsText(name: String) throws {
    let trace = try EditingTraces.load(name, as: ConcurrentTrace.self)
    let words = (trace.txns.count + 63) / 64
    struct Branch {
      var document: TextDocument
      /// Which transactions the document holds, one bit each.
      var applied: [UInt64]
    }
    var branches: [Int: Branch] = [:]
    var childrenLeft: [Int: Int] = [:]
    var updates: [TextUpdate] = []
    var heads: [Branch] = []
    var merges = 0
    /// The branch of transaction `index`, for one of its children: the last child takes it, the others copy.
    func take(_ index: Int) -> Branch {
      childrenLeft[index]! -= 1
      if childrenLeft[index] == 0 {
        childrenLeft[index] = nil
        return branches.removeValue(forKey: index)!
      }
      return branches[index]!
    }
    func merge(_ source: Branch, into branch: inout Branch) {
      for word in 0..<words {
        var missing = source.applied[word] & ~branch.applied[word]
        while missing != 0 {
          let bit = missing.trailingZeroBitCount
          missing &= missing - 1
          branch.document.apply(updates[word * 64 + bit])
        }
        branch.applied[word] |= source.applied[word]
      }
    }
    for (index, transaction) in trace.txns.enumerated() {
      #expect(transaction.parents.allSatisfy { $0 < index })
      var branch: Branch
      if let first = transaction.parents.first {
        branch = take(first)
        for other in transaction.parents.dropFirst() {
          merge(take(other), into: &branch)
          merges += 1
        }
      } else {
        branch = Branch(document: TextDocument(), applied: Array(repeating: 0, count: words))
      }
      var made = TextUpdate()
      for patch in transaction.patches {
        let update = try branch.document.splice(
          at: patch.position, delete: patch.delete, insert: patch.insert, client: "agent\(transaction.agent)")
        made.runs += update.runs
        made.deletes += update.deletes
      }
      updates.append(made)
      branch.applied[index / 64] |= 1 << UInt64(index % 64)
      if transaction.numChildren > 0 {
        branches[index] = branch
        childrenLeft[index] = transaction.numChildren
      } else {
        heads.append(branch)
      }
    }
    #expect(branches.isEmpty)
    #expect(merges > 1_000)
    var final = heads[0]
    for head in heads.dropFirst() { merge(head, into: &final) }
    #expect(!final.document.hasPendingOperations)
    #expect(final.document.scalars == Array(trace.endContent.unicodeScalars))
    // The same from the heads' whole states, with `merge`.
    var merged = TextDocument()
    for head in heads.reversed() { merged.merge(head.document) }
    #expect(merged.scalars == final.document.scalars)
    #expect(try TextDocument(encoded: final.document.encoded()).scalars == final.document.scalars)
  }
}

/// One edit: delete `delete` characters at `position`, then insert `insert` there.
struct TracePatch: Decodable {
  var position: Int
  var delete: Int
  var insert: String

  init(from decoder: any Decoder) throws {
    var fields = try decoder.unkeyedContainer()
    position = try fields.decode(Int.self)
    delete = try fields.decode(Int.self)
    insert = try fields.decode(String.self)
  }
}

struct SequentialTrace: Decodable {
  struct Transaction: Decodable { var patches: [TracePatch] }
  var startContent: String
  var endContent: String
  var txns: [Transaction]
}

struct ConcurrentTrace: Decodable {
  struct Transaction: Decodable {
    var parents: [Int]
    var numChildren: Int
    var agent: Int
    var patches: [TracePatch]
  }
  var endContent: String
  var txns: [Transaction]
}

/// The editing traces: `shared/data/editing-traces` beside the repository (the layout CI and the lead's
/// checkout share: the repository and `shared` are siblings), found by walking up from this file. Missing
/// data fails the tests that need it, with where it was looked for.
enum EditingTraces {
  struct Missing: Error, CustomStringConvertible {
    var description: String
  }

  static func directory(from file: String = #filePath) throws -> URL {
    var folder = URL(fileURLWithPath: file).deletingLastPathComponent()
    var looked: [String] = []
    while folder.path != "/" {
      let candidate = folder.appendingPathComponent("shared/data/editing-traces")
      if FileManager.default.fileExists(atPath: candidate.appendingPathComponent("README.md").path) {
        return candidate
      }
      looked.append(candidate.path)
      folder.deleteLastPathComponent()
    }
    throw Missing(description: "editing traces not found; looked in \(looked.joined(separator: ", "))")
  }

  /// Trace `name` decompressed with `gzip -dc` and decoded.
  static func load<Trace: Decodable>(_ name: String, as: Trace.Type) throws -> Trace {
    let file = try directory().appendingPathComponent("\(name).json.gz")
    guard FileManager.default.fileExists(atPath: file.path) else {
      throw Missing(description: "editing trace \(file.path) is missing")
    }
    let gzip = Process()
    gzip.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    gzip.arguments = ["gzip", "-dc", file.path]
    let output = Pipe()
    gzip.standardOutput = output
    try gzip.run()
    let json = output.fileHandleForReading.readDataToEndOfFile()
    gzip.waitUntilExit()
    guard gzip.terminationStatus == 0 else {
      throw Missing(description: "gzip -dc \(file.path) failed (\(gzip.terminationStatus))")
    }
    return try JSONDecoder().decode(Trace.self, from: json)
  }
}
