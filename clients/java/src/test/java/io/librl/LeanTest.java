package io.librl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lettuce.core.protocol.ProtocolVersion;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * The limiter's own socket (LettuceLimiter.create(client, uri, connectTimeout)): many callers
 * pipelined on it, and what happens when the server drops it. Every check of StandaloneTest runs
 * through it too ("lettuce lean").
 */
class LeanTest {
  private static final Duration MINUTE = Duration.ofMinutes(1);
  private static final TestServers.Flavor FLAVOR = TestServers.Flavor.REDIS8;

  @Test
  void pipelinedCallsEachGetTheirOwnReply() {
    TestServers.Server s = TestServers.standalone(FLAVOR);
    TestServers.flushAll(s);
    AsyncLimiter l = Clients.lean(s, ProtocolVersion.RESP3).async();
    // Keys of different limits sent together: a reply matched to the wrong call shows as a
    // wrong limit or remaining count.
    List<CompletableFuture<Decision>> sent = new ArrayList<>();
    for (int i = 0; i < 500; i++) {
      sent.add(l.fixed("lean:" + i, 1000 + i, MINUTE).toCompletableFuture());
    }
    for (int i = 0; i < 500; i++) {
      Decision d = sent.get(i).join();
      assertTrue(d.allowed());
      assertEquals(1000 + i, d.limit());
      assertEquals(999 + i, d.remaining());
    }
  }

  @Test
  void aDroppedSocketFallsBackToLettuceThenConnectsAgain() throws InterruptedException {
    TestServers.Server s = TestServers.standalone(FLAVOR);
    TestServers.flushAll(s);
    Limiter l = Clients.lean(s, ProtocolVersion.RESP3).sync();
    assertTrue(l.fixed("lean:drop", 100, MINUTE).allowed());
    // Every normal client's connection: the limiter's socket and Lettuce's.
    s.call("CLIENT", "KILL", "TYPE", "normal");
    // Lettuce reconnects by itself and the socket within about a second; calls meanwhile may
    // fail (as on a lost Lettuce connection), but never get another call's reply.
    long admitted = 0;
    for (int i = 0; i < 60 && admitted < 5; i++) {
      try {
        Decision d = l.fixed("lean:drop", 100, MINUTE);
        assertEquals(100, d.limit());
        admitted++;
      } catch (LibrlCommandException e) {
        Thread.sleep(100);
      }
    }
    assertEquals(5, admitted);
    // After the socket is back, the calls are counted on the same key as before.
    Thread.sleep(1500);
    Decision d = l.fixed("lean:drop", 100, MINUTE);
    assertEquals(100 - 1 - admitted - 1, d.remaining());
  }
}
