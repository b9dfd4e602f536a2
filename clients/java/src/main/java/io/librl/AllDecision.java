package io.librl;

import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * {@code RL.ALL}'s reply: admitted only if every clause admitted the call.
 *
 * @param allowed every clause admitted the call, and each recorded its cost
 * @param retryAfter zero when admitted; else the longest wait among the denying clauses, or
 *     {@link Decision#NEVER} if one of them can never admit it
 * @param decisions one decision per clause, in the clauses' order: when the call is denied, each
 *     is what the clause's PEEK would answer, so its {@code allowed} says whether that clause was
 *     one of the reasons
 */
public record AllDecision(boolean allowed, Duration retryAfter, List<Decision> decisions) {
  public AllDecision {
    Objects.requireNonNull(retryAfter, "retryAfter");
    decisions = List.copyOf(decisions);
  }

  /** Whether no wait helps ({@code retryAfter == NEVER}). */
  public boolean neverAdmits() {
    return Decision.NEVER.equals(retryAfter);
  }
}
