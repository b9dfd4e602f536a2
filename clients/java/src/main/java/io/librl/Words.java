package io.librl;

import java.util.ArrayList;
import java.util.List;

/** A command's words as they are sent: the command's name, then its arguments. */
final class Words {
  private final List<String> words = new ArrayList<>();

  Words(String command) {
    words.add(command);
  }

  Words add(String word) {
    words.add(word);
    return this;
  }

  Words add(long n) {
    words.add(Long.toString(n));
    return this;
  }

  /** Every word, the command's name first. */
  List<String> all() {
    return List.copyOf(words);
  }
}
