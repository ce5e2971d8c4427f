import Broker
import Daemon
import FuzzSupport
import TOMLConfig

// Configuration files of both programs: the same text is read as the broker's and as the daemon's, as
// `--check-config` and SIGHUP read them (bytes to text as `ConfigReader(contentsOf:)` does). Each read gives a
// configuration or a `ConfigError` that names a line in the text and/or a key, with a message; never a trap,
// in our code or in toml++ underneath. A configuration read twice is the same, and reloading into itself
// changes nothing.

/// The error names a place in `text` and says something.
private func requireNamed(_ error: ConfigError, in text: String, _ program: String) {
  let lineCount = text.utf8.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
  require(
    error.line != nil || !error.key.isEmpty, "\(program): an error naming neither line nor key: \(error)")
  if let line = error.line {
    require((1...lineCount).contains(line), "\(program): line \(line) of a \(lineCount)-line file: \(error)")
  }
  require(!error.message.isEmpty, "\(program): an error without a message: \(error)")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  let text = String(decoding: UnsafeRawBufferPointer(start: data, count: size), as: UTF8.self)
  do throws(ConfigError) {
    let broker = try BrokerConfiguration.parse(text, file: "broker.toml")
    let again = try BrokerConfiguration.parse(text, file: "broker.toml")
    require(again == broker, "broker: a second read differs")
    require(broker.reloadPlan(to: broker).isEmpty, "broker: reloading into itself changes keys")
  } catch {
    requireNamed(error, in: text, "broker")
  }
  do throws(ConfigError) {
    let daemon = try DaemonConfiguration.parse(text, file: "pagesyncd.toml")
    let again = try DaemonConfiguration.parse(text, file: "pagesyncd.toml")
    require(again == daemon, "daemon: a second read differs")
    require(daemon.reloadPlan(to: daemon).isEmpty, "daemon: reloading into itself changes keys")
  } catch {
    requireNamed(error, in: text, "daemon")
  }
  return 0
}

runLibFuzzer { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
