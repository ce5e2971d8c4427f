import ArgumentParser
import PagesyncClient

#if canImport(Glibc)
  import Glibc
#endif

/// `--socket PATH` and `--json`: an option group in every leaf command, so both are accepted after any
/// command's words (`pagesync offline list --json`).
struct ConnectionOptions: ParsableArguments {
  /// The socket when neither `--socket` nor `$PAGESYNC_SOCKET` names one (pagesyncd's `[api] socket`
  /// default).
  static let defaultSocketPath = LocalAPIClient.defaultSocketPath

  @Option(
    name: .long,
    help: ArgumentHelp(
      "The daemon's Unix socket (default: $PAGESYNC_SOCKET, else \(ConnectionOptions.defaultSocketPath)).",
      valueName: "path"))
  var socket: String?

  @Flag(name: .long, help: "Print the daemon's JSON answer, one JSON value, instead of text.")
  var json = false

  init() {}

  /// `--socket`, else a non-empty `$PAGESYNC_SOCKET`, else the default.
  var socketPath: String {
    if let socket { return socket }
    if let variable = getenv("PAGESYNC_SOCKET"), variable.pointee != 0 { return String(cString: variable) }
    return ConnectionOptions.defaultSocketPath
  }

  func validate() throws {
    if socket?.isEmpty == true { throw ValidationError("--socket needs a path") }
  }

  /// Sends `call`'s request and prints the answer: its JSON as received with `--json`, else `human(answer)`
  /// (which reads the JSON leniently, showing what is there). A failure prints `pagesync: MESSAGE` on stderr and
  /// exits with its status (`CLIFailure.exitCode`).
  func perform<Answer>(_ call: LocalAPICall<Answer>, human: (JSONValue) throws(CLIFailure) -> String) throws {
    do throws(CLIFailure) {
      let answer = try LocalAPIClient(socketPath: socketPath).send(call.request)
      if json {
        var body = answer.body
        while let last = body.last, last == 0x20 || last == 0x0A || last == 0x0D || last == 0x09 {
          body.removeLast()
        }
        writeStandardOutput(body + [0x0A])
      } else {
        writeStandardOutput(Array((try human(answer.value) + "\n").utf8))
      }
    } catch {
      writeStandardError("pagesync: \(error.commandLineMessage)\n")
      throw ExitCode(error.exitCode)
    }
  }
}
