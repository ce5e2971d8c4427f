import EventLoop
import StrictJSON

/// An editing trace of the `josephg/editing-traces` format (../shared/data/editing-traces/README.md): a
/// sequential one (transactions in order, each against the text the previous ones left) or a concurrent one
/// (each transaction against the text after its `parents`, typed by `agent`).
public struct EditingTrace: Sendable {
  /// One edit: at `position` (Unicode scalars), delete `delete` scalars, then insert `insert`.
  public struct Patch: Sendable {
    public var position: Int
    public var delete: Int
    public var insert: String
  }

  public struct Transaction: Sendable {
    /// The transactions this one was typed against (indices of earlier ones); empty for every transaction of a
    /// sequential trace.
    public var parents: [Int] = []
    public var agent = 0
    public var patches: [Patch] = []
  }

  public var concurrent = false
  public var startContent = ""
  public var endContent = ""
  public var agents = 1
  public var transactions: [Transaction] = []

  public var patchCount: Int { transactions.reduce(0) { $0 + $1.patches.count } }

  /// Reads a trace file: gzip'd (`.gz`, decompressed by `gzip -dc`) or plain JSON.
  public static func load(path: String) throws(LoadError) -> EditingTrace {
    let bytes = path.hasSuffix(".gz") ? try gunzip(path) : try readWhole(path)
    return try parse(bytes)
  }

  /// Parses a trace's JSON.
  public static func parse(_ bytes: [UInt8]) throws(LoadError) -> EditingTrace {
    let trace: EditingTrace?
    do {
      trace = try bytes.withUnsafeBufferPointer { buffer throws(JSONReadError) in
        try JSONReader.read(buffer) { reader throws(JSONReadError) in try readTrace(&reader) }
      }
    } catch {
      throw .setupFailed("trace: \(error)")
    }
    guard let trace else { throw .setupFailed("trace: empty") }
    try trace.check()
    return trace
  }

  private static func readTrace(_ reader: inout JSONReader) throws(JSONReadError) -> EditingTrace {
    var trace = EditingTrace()
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      if key.matches("kind") {
        trace.concurrent = try reader.readString() == "concurrent"
      } else if key.matches("startContent") {
        trace.startContent = try reader.readString()
      } else if key.matches("endContent") {
        trace.endContent = try reader.readString()
      } else if key.matches("numAgents") {
        trace.agents = try reader.readInt()
      } else if key.matches("txns") {
        var elements = try reader.beginArray()
        while try reader.nextElement(&elements) {
          trace.transactions.append(try readTransaction(&reader))
        }
      } else {
        try reader.skipValue()
      }
    }
    return trace
  }

  private static func readTransaction(_ reader: inout JSONReader) throws(JSONReadError) -> Transaction {
    var transaction = Transaction()
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      if key.matches("parents") {
        transaction.parents = try [Int](reading: &reader)
      } else if key.matches("agent") {
        transaction.agent = try reader.readInt()
      } else if key.matches("patches") {
        var patches = try reader.beginArray()
        while try reader.nextElement(&patches) {
          var fields = try reader.beginArray()
          var patch = Patch(position: 0, delete: 0, insert: "")
          guard try reader.nextElement(&fields) else {
            throw .invalidValue("a patch without a position", at: 0)
          }
          patch.position = try reader.readInt()
          guard try reader.nextElement(&fields) else {
            throw .invalidValue("a patch without a length", at: 0)
          }
          patch.delete = try reader.readInt()
          guard try reader.nextElement(&fields) else { throw .invalidValue("a patch without a text", at: 0) }
          patch.insert = try reader.readString()
          guard try !reader.nextElement(&fields) else { throw .invalidValue("a patch of four fields", at: 0) }
          transaction.patches.append(patch)
        }
      } else {
        try reader.skipValue()
      }
    }
    return transaction
  }

  /// What the replays rely on: parents before their children, agents in range, and each agent's transactions
  /// in one causal chain (its next one is typed after its previous one), which lets one replica per agent replay
  /// a concurrent trace.
  func check() throws(LoadError) {
    guard agents >= 1, agents <= 1024 else { throw .setupFailed("trace: \(agents) agents") }
    // Per transaction, how many of each agent's transactions it has seen (valid while the chains hold).
    var versions: [[Int]] = []
    var typed = [Int](repeating: 0, count: agents)
    for (index, transaction) in transactions.enumerated() {
      guard (0..<agents).contains(transaction.agent) else {
        throw .setupFailed("trace: transaction \(index)'s agent \(transaction.agent) is out of range")
      }
      var version = [Int](repeating: 0, count: agents)
      for parent in transaction.parents {
        guard (0..<index).contains(parent) else {
          throw .setupFailed("trace: transaction \(index)'s parent \(parent) does not come before it")
        }
        for agent in 0..<agents { version[agent] = max(version[agent], versions[parent][agent]) }
      }
      if concurrent {
        guard version[transaction.agent] == typed[transaction.agent] else {
          throw .setupFailed(
            "trace: agent \(transaction.agent)'s transaction \(index) is concurrent with its own earlier one")
        }
        typed[transaction.agent] += 1
        version[transaction.agent] = typed[transaction.agent]
        versions.append(version)
      }
    }
  }

  private static func readWhole(_ path: String) throws(LoadError) -> [UInt8] {
    guard let text = HostProcess.readFile(path) else { throw .setupFailed("cannot read \(path)") }
    return Array(text.utf8)
  }

  /// `gzip -dc path`'s output, read through a pipe on a loop of its own.
  private static func gunzip(_ path: String) throws(LoadError) -> [UInt8] {
    let loop: Loop
    do { loop = try Loop() } catch { throw .setupFailed("cannot make a loop: \(error)") }
    var output: [UInt8] = []
    var exit: (status: Int64, signal: Int32)?
    var open = 2
    do {
      let process = try ChildProcess(
        loop: loop, executable: "gzip", arguments: ["-dc", "--", path], output: .capture, error: .inherit)
      let done = {
        open -= 1
        if open == 0 { process.close() }
      }
      process.standardOutput!.onRead = { bytes in output.append(contentsOf: bytes) }
      process.standardOutput!.onEnd = done
      process.standardOutput!.onError = { _ in done() }
      process.onExit = { status, signal in
        exit = (status, signal)
        done()
      }
      process.standardOutput!.startReading()
    } catch {
      try? loop.close()
      throw .setupFailed("cannot start gzip: \(error)")
    }
    loop.run()
    loop.closeAllHandles()
    loop.runNoWait()
    try? loop.close()
    guard let exit, exit.status == 0, exit.signal == 0 else {
      throw .setupFailed(
        "gzip -dc \(path) failed (\(exit.map { "status \($0.status)" } ?? "no exit status"))")
    }
    return output
  }
}
