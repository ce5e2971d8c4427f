extension TextUpdate {
  /// The update with replica `client`'s characters from counter `threshold` on given to replica `newClient`,
  /// numbered from 0 (`client`@`threshold` becomes `newClient`@0), and `client`'s mark operations made
  /// `newClient`'s. Characters below `threshold`, and every other replica's, keep their ids: runs, origins,
  /// deleted ranges and mark anchors alike, so the result refers to the same characters as before, except that
  /// those typed from `threshold` on now belong to `newClient`.
  ///
  /// What a device does when it must send, under a new client id, edits it made under one that another copy of
  /// its store also used (a store restored from a backup, a cloned image): those characters' ids may be taken
  /// by the other copy's, which are different characters. A run or deleted range across `threshold` is split
  /// there; the second half of a run follows the first (its left origin is the first half's last character), as
  /// typing one after the other makes it.
  ///
  /// `marks: false` leaves every mark operation as it is (the device's own state, where `client`'s marks made
  /// before the threshold's characters cannot be told from those made after).
  public func renaming(
    _ client: String, from threshold: UInt32, to newClient: String, marks renameMarks: Bool = true
  ) -> TextUpdate {
    func rename(_ id: CharacterID?) -> CharacterID? {
      guard let id, id.client == client, id.counter >= threshold else { return id }
      return CharacterID(client: newClient, counter: id.counter - threshold)
    }
    func rename(_ anchor: MarkAnchor) -> MarkAnchor {
      switch anchor {
      case .before(let id): .before(rename(id)!)
      case .after(let id): .after(rename(id)!)
      case .end: .end
      }
    }
    var result = TextUpdate()
    for run in runs {
      var run = run
      run.left = rename(run.left)
      run.right = rename(run.right)
      guard run.client == client, run.counter &+ run.length > threshold else {
        result.runs.append(run)
        continue
      }
      if run.counter < threshold {
        // Split: the part before the threshold keeps its ids, the rest follows it.
        let kept = threshold - run.counter
        var first = run
        first.length = kept
        first.text = run.text.map { Array($0.prefix(Int(kept))) }
        result.runs.append(first)
        run.left = CharacterID(client: client, counter: threshold - 1)
        run.text = run.text.map { Array($0.dropFirst(Int(kept))) }
        run.length -= kept
        run.counter = threshold
      }
      run.client = newClient
      run.counter -= threshold
      result.runs.append(run)
    }
    for range in deletes {
      guard range.client == client, range.counter &+ range.length > threshold else {
        result.deletes.append(range)
        continue
      }
      var range = range
      if range.counter < threshold {
        var first = range
        first.length = threshold - range.counter
        result.deletes.append(first)
        range.length -= first.length
        range.counter = threshold
      }
      range.client = newClient
      range.counter -= threshold
      result.deletes.append(range)
    }
    for mark in marks {
      var mark = mark
      mark.start = rename(mark.start)
      mark.end = rename(mark.end)
      if renameMarks && mark.client == client { mark.client = newClient }
      result.marks.append(mark)
    }
    return result
  }

  /// The update with replica `client`'s mark operations stamped `time`: a mutation sent again with a new time
  /// (its old one was refused as too far ahead) carries its marks' new time too, or they would still win every
  /// conflict until then.
  public func stampingMarks(of client: String, at time: MarkTime) -> TextUpdate {
    var result = self
    for index in result.marks.indices where result.marks[index].client == client {
      result.marks[index].time = time
    }
    return result
  }
}
