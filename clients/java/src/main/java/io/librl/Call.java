package io.librl;

import java.time.Duration;
import java.util.List;

/**
 * A checked command ready to send.
 *
 * @param name the command as errors name it: RL.FIXED, RL.ALL, RL.OVERRIDE SET...
 * @param words every word sent, the command's name first (RL.OVERRIDE's subcommand is the second)
 * @param routeKey the key whose slot routes the call; null for a call to any one node
 * @param keys every key and override key the call names: the cluster's one-slot check, and which
 *     denials a refund forgets
 * @param effect what the call means to the denial cache
 * @param writes whether the call may change the dataset (durability waits for it)
 * @param serverWait the longest time the server may hold the reply (WAIT); zero when it answers
 *     at once
 */
record Call(
    String name,
    List<String> words,
    String routeKey,
    List<String> keys,
    Effect effect,
    boolean writes,
    Duration serverWait) {

  /** What a call means to the denial cache. */
  enum Effect {
    /** A read, or a write that ends no denial. */
    NONE,
    /** A limiter call whose denial may be kept. */
    CACHEABLE,
    /** Gives units back: forget the denials naming its keys. */
    REFUND,
    /** Changes an override: forget every denial. */
    CLEAR_ALL
  }

  /** Whether the reply may be held by the server (WAIT): such a call holds its connection. */
  boolean holds() {
    return !serverWait.isZero();
  }

  /** The command's name, argv[0]. */
  String command() {
    return words.get(0);
  }

  /** The arguments after the name. */
  List<String> args() {
    return words.subList(1, words.size());
  }
}
