#if canImport(Glibc)
  import Glibc
#endif

@_silgen_name("LLVMFuzzerRunDriver")
private func runFuzzerDriver(
  _ argc: UnsafeMutablePointer<Int32>,
  _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
  _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

/// Runs libFuzzer with the process's arguments and `callback` as the target, and exits with its status.
///
/// SwiftPM points an executable's `main` at its top-level code (`--defsym`), so libFuzzer's own main never runs;
/// each target's main.swift calls this instead.
public func runLibFuzzer(_ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Never {
  var argc = CommandLine.argc
  var argv = CommandLine.unsafeArgv
  exit(runFuzzerDriver(&argc, &argv, callback))
}
