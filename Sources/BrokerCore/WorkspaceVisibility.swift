/// What one grant may see, by workspace: the workspace ids it holds, and the answer for each workspace number of
/// a `ChannelIndex` once worked out (a number never changes meaning in its index).
///
/// The fan-out asks per subscriber of every page a commit changed, a catch-up per page it names, and hashing the
/// workspace's id every time was most of that work; an answer cached by number is one array read. A grant that
/// changes needs a new value (`FanOut.setWorkspaces(_:of:)`).
public struct WorkspaceVisibility: Sendable {
  /// The workspace ids the grant holds.
  public let workspaces: Set<String>
  /// By workspace number: nil until asked.
  private var known: ContiguousArray<Bool?> = []

  public init(workspaces: Set<String>) {
    self.workspaces = workspaces
  }

  /// Whether the grant may see the workspace numbered `number` in `index`.
  public mutating func maySee(_ number: ChannelIndex.WorkspaceNumber, in index: ChannelIndex) -> Bool {
    if let answer = answer(for: number) { return answer }
    let answer = workspaces.contains(index.workspaceID(number))
    remember(answer, for: number)
    return answer
  }

  /// Whether the grant may see the workspace `id` (no cache: for a workspace the index could not number).
  public func maySee(workspaceID id: String) -> Bool { workspaces.contains(id) }

  /// The cached answer for `number`, if it was worked out.
  @inline(__always)
  func answer(for number: ChannelIndex.WorkspaceNumber) -> Bool? {
    let position = Int(number.rawValue)
    return position < known.count ? known[position] : nil
  }

  mutating func remember(_ answer: Bool, for number: ChannelIndex.WorkspaceNumber) {
    let position = Int(number.rawValue)
    if position >= known.count { known += repeatElement(nil, count: position + 1 - known.count) }
    known[position] = answer
  }

  /// The numbers whose answer is cached, with it; for the consistency checks.
  var cachedAnswers: [(number: ChannelIndex.WorkspaceNumber, maySee: Bool)] {
    known.enumerated().compactMap { position, answer in
      answer.map { (ChannelIndex.WorkspaceNumber(rawValue: UInt16(position)), $0) }
    }
  }
}
