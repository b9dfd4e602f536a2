package io.librl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

/** The command set without a server: the words sent, the replies read, the denial cache's clock. */
class CommandsTest {
  private static final Duration SECOND = Duration.ofSeconds(1);

  @Test
  void slotsMatchTheClusterSpecificationAndBothClients() {
    assertEquals(0x31C3, Slot.of("123456789"));
    assertEquals(12182, Slot.of("foo"));
    assertEquals(3443, Slot.of("{user1000}.following"));
    assertEquals(3443, Slot.of("{user1000}.followers"));
    // Only the first tag counts; an empty one does not, and the whole key is hashed.
    for (String key :
        List.of("{}x", "x{}", "{a}{b}", "a{b", "}a{b}", "{ü}:1", "plan:{acme}", "", "{", "{}", "{{a}}",
            "rl:{ip:203.0.113.9}:s", "日本{語}")) {
      assertEquals(redis.clients.jedis.util.JedisClusterCRC16.getSlot(key), Slot.of(key), key);
      assertEquals(io.lettuce.core.cluster.SlotHash.getSlot(key), Slot.of(key), key);
    }
    assertTrue(Slot.of("{}x") != Slot.of("x"));
    assertEquals(Slot.of("{a}{b}"), Slot.of("a"));
  }

  @Test
  void aSingleCallFollowsTheGrammar() {
    Call k =
        Calls.single(
            Token.of("k", 5, Duration.ofMillis(1500))
                .burst(10)
                .cost(2)
                .waitUpTo(Duration.ZERO)
                .block(Duration.ofMinutes(1))
                .override("o")
                .peek());
    assertEquals(
        List.of("RL.TOKEN", "k", "5", "1500ms", "BURST", "10", "COST", "2", "WAIT", "0ms",
            "BLOCK", "60000ms", "OVERRIDE", "o", "PEEK"),
        k.words());
    assertEquals("k", k.routeKey());
    assertEquals(List.of("k", "o"), k.keys());
    assertEquals(Call.Effect.NONE, k.effect());
    assertFalse(k.writes());
    assertEquals(
        List.of("RL.FIXED", "f", "3", "60000ms", "ALIGNED", "REFUND", "1"),
        Calls.single(Fixed.of("f", 3, Duration.ofMinutes(1)).aligned().refund(1)).words());
    assertEquals(
        List.of("RL.SLIDING", "s", "3", "1000ms", "APPROX", "COST", "0"),
        Calls.single(Sliding.of("s", 3, SECOND).approx().cost(0)).words());
    assertFalse(Calls.single(Sliding.of("s", 3, SECOND).cost(0)).writes());
    assertEquals(
        List.of("RL.TOKEN", "t", "1", "1000ms", "RESERVE", "250ms"),
        Calls.single(Token.of("t", 1, SECOND).reserve(Duration.ofMillis(250))).words());
    // Options are immutable: a clause is a value.
    Fixed base = Fixed.of("f", 1, SECOND);
    base.cost(5);
    assertEquals(OptionalLong.empty(), base.cost());
    assertEquals("RL.FIXED f 1 1000ms COST 5", base.cost(9).cost(5).toString());
  }

  @Test
  void allFollowsTheGrammarAndSaysWhatItDoes() {
    Call a =
        Calls.all(
            List.of(
                Fixed.of("{a}:1", 1, SECOND).aligned(),
                Sliding.of("{a}:2", 2, Duration.ofMinutes(1)).approx().refund(1),
                Token.of("{a}:3", 3, SECOND).waitUpTo(Duration.ofMillis(700)).override("{a}:o")),
            false);
    assertEquals(
        List.of("RL.ALL", "FIXED", "{a}:1", "1", "1000ms", "ALIGNED", "SLIDING", "{a}:2", "2",
            "60000ms", "APPROX", "REFUND", "1", "TOKEN", "{a}:3", "3", "1000ms", "WAIT", "700ms",
            "OVERRIDE", "{a}:o"),
        a.words());
    assertEquals("{a}:1", a.routeKey());
    assertEquals(List.of("{a}:1", "{a}:2", "{a}:3", "{a}:o"), a.keys());
    assertEquals(Call.Effect.REFUND, a.effect());
    assertEquals(Duration.ofMillis(700), a.serverWait());
    Call peek = Calls.all(List.of(Fixed.of("x", 1, SECOND)), true);
    assertEquals(List.of("RL.ALL", "FIXED", "x", "1", "1000ms", "PEEK"), peek.words());
    assertFalse(peek.writes());
  }

  @Test
  void concurrentFollowsTheGrammarAndIsNeverCached() {
    Concurrent c = Concurrent.of("c", 5, Duration.ofMinutes(1));
    Call acquire = Calls.single(c.cost(2).waitUpTo(SECOND).override("o"));
    assertEquals(
        List.of("RL.CONCURRENT", "c", "5", "60000ms", "COST", "2", "WAIT", "1000ms", "OVERRIDE", "o"),
        acquire.words());
    assertEquals(SECOND, acquire.serverWait());
    assertTrue(acquire.writes());
    assertEquals(Call.Effect.NONE, acquire.effect());
    assertEquals(
        List.of("RL.CONCURRENT", "c", "5", "60000ms", "RELEASE", "42"),
        Calls.single(c.release(42)).words());
    assertEquals(
        List.of("RL.CONCURRENT", "c", "5", "60000ms", "RENEW", "42", "PEEK"),
        Calls.single(c.renew(42).peek()).words());
    assertEquals(OptionalLong.of(42), c.renew(42).renews());
    assertEquals(OptionalLong.empty(), c.renew(42).acquire().renews());
    assertFalse(Calls.single(c.cost(0)).writes());
    // The lease's own calls keep the key, limit, lease and override, nothing else.
    assertEquals(
        List.of("RL.CONCURRENT", "c", "5", "60000ms", "RELEASE", "7", "OVERRIDE", "o"),
        Calls.single(c.cost(3).waitUpTo(SECOND).override("o").forLease().release(7)).words());
    Call all =
        Calls.all(List.of(Fixed.of("{u}:d", 9, SECOND), Concurrent.of("{u}:c", 2, SECOND).cost(2)), false);
    assertEquals(
        List.of("RL.ALL", "FIXED", "{u}:d", "9", "1000ms", "CONCURRENT", "{u}:c", "2", "1000ms", "COST", "2"),
        all.words());
    assertEquals(Call.Effect.NONE, all.effect(), "an RL.ALL taking a lease was cacheable");
    List<Runnable> bad =
        List.of(
            () -> Calls.single(c.refund(1)),
            () -> Calls.single(c.block(SECOND)),
            () -> Calls.single(c.release(1).cost(1)),
            () -> Calls.single(c.renew(1).waitUpTo(SECOND)),
            () -> Calls.single(c.release(0)),
            () -> Calls.single(c.waitUpTo(Duration.ofMillis(-1))),
            () -> Calls.all(List.of(c.waitUpTo(SECOND)), false),
            () -> Calls.all(List.of(c.release(1)), false));
    for (Runnable r : bad) {
      assertThrows(LibrlArgumentException.class, r::run);
    }
  }

  @Test
  void overridesFollowTheGrammar() {
    assertEquals(
        List.of("RL.OVERRIDE", "SET", "o", "7", "1000ms", "BURST", "9", "TTL", "3600000ms"),
        Calls.overrideSet(LimitOverride.of("o", 7, SECOND).burst(9).ttl(Duration.ofHours(1))).words());
    assertEquals("RL.OVERRIDE SET", Calls.overrideSet(LimitOverride.of("o", 7, SECOND)).name());
    assertEquals(List.of("RL.OVERRIDE", "GET", "o"), Calls.overrideGet("o").words());
    assertEquals(
        List.of("RL.OVERRIDE", "LIST", "0", "MATCH", "p:*", "COUNT", "50"),
        Calls.overrideList("0", "p:*", 50).words());
    assertNull(Calls.overrideList("0", null, 0).routeKey());
  }

  @Test
  void badArgumentsAreRefusedBeforeSending() {
    List<Runnable> bad =
        List.of(
            () -> Calls.single(Fixed.of("k", 1, Duration.ofNanos(1_500_000))),
            () -> Calls.single(Fixed.of("k", 1, Duration.ZERO)),
            () -> Calls.single(Fixed.of("k", 1, SECOND.negated())),
            () -> Calls.single(Fixed.of("k", 1, SECOND).cost(1).refund(1)),
            () -> Calls.single(Token.of("k", 1, SECOND).reserve(Duration.ZERO).waitUpTo(Duration.ZERO)),
            () -> Calls.single(Fixed.of("k", 1, SECOND).block(Duration.ZERO)),
            () -> Calls.single(Token.of("k", 1, SECOND).reserve(Duration.ofMillis(-1))),
            () -> Calls.all(List.of(Fixed.of("k", 1, SECOND).peek()), false),
            () -> Calls.all(List.of(), false),
            () -> Calls.overrideSet(LimitOverride.of("o", 1, SECOND).ttl(Duration.ZERO)),
            () -> Calls.single(Fixed.of("k", 1, Duration.ofSeconds(Long.MAX_VALUE))));
    for (Runnable r : bad) {
      assertThrows(LibrlArgumentException.class, r::run);
    }
    LibrlArgumentException e =
        assertThrows(
            LibrlArgumentException.class,
            () -> Calls.all(List.of(Fixed.of("a", 1, SECOND), Fixed.of("b", 1, SECOND).peek()), false));
    assertEquals("all clause 1 (FIXED b)", e.where());
    assertTrue(e.getMessage().contains("peekAll"), e.getMessage());
    assertThrows(NullPointerException.class, () -> Fixed.of(null, 1, SECOND));
    assertThrows(IllegalArgumentException.class, () -> new DenialCache(0));
  }

  @Test
  void keysInTwoSlotsAreRefusedWithAHashTagHint() {
    LibrlArgumentException e =
        assertThrows(
            LibrlArgumentException.class,
            () -> Slot.check("RL.ALL", List.of("user42:min", "user42:day")));
    assertTrue(e.getMessage().contains("hash tag"), e.getMessage());
    assertTrue(e.getMessage().contains("{user42}:min and {user42}:day"), e.getMessage());
    Slot.check("RL.ALL", List.of("{user42}:min", "{user42}:day", "plan:{user42}"));
  }

  @Test
  void repliesAreReadAndLongerOnesAccepted() {
    List<Object> six = List.of(0L, 3L, -1L, 3L, 0L, 900L);
    Decision d = Replies.decision("RL.FIXED", six);
    assertFalse(d.allowed());
    assertEquals(Decision.NEVER, d.retryAfter());
    assertTrue(d.neverAdmits());
    assertEquals(Duration.ofMillis(900), d.resetAfter());
    // A seventh field (a later librl's) is ignored, of any type, at every level; RL.CONCURRENT's
    // seventh is its lease, and an eighth is ignored.
    List<Object> seven = List.of(1L, 1L, 0L, 10L, 9L, 60000L, 42L);
    assertEquals(
        new Decision(true, 1, Duration.ZERO, 10, 9, Duration.ofMinutes(1)),
        Replies.decision("RL.FIXED", seven));
    assertEquals(
        new Decision(true, 1, Duration.ZERO, 10, 9, Duration.ofMinutes(1)),
        Replies.decision("RL.FIXED", List.of(1L, 1L, 0L, 10L, 9L, 60000L, "new", List.of(1L))));
    List<Object> eight = List.of(1L, 1L, 0L, 10L, 9L, 60000L, 42L, 7L, "more");
    assertEquals(
        new Decision(true, 1, Duration.ZERO, 10, 9, Duration.ofMinutes(1), 42),
        Replies.decision("RL.CONCURRENT", eight, true));
    assertThrows(LibrlCommandException.class, () -> Replies.decision("RL.CONCURRENT", six, true));
    AllDecision a = Replies.all(List.of(1L, 0L, seven, eight), new boolean[] {false, true});
    assertTrue(a.allowed());
    assertEquals(2, a.decisions().size());
    assertEquals(0, a.decisions().get(0).leaseId());
    assertEquals(42, a.decisions().get(1).leaseId());
    assertEquals(
        Optional.of(new OverrideValues(5, SECOND, OptionalLong.empty(), Optional.empty())),
        Replies.override(List.of(5L, 1000L, 0L, -1L, 99L, "later")));
    assertEquals(Optional.empty(), Replies.override(null));
    OverridePage page =
        Replies.page(
            List.of(
                "17".getBytes(StandardCharsets.UTF_8),
                List.of(List.of("o".getBytes(StandardCharsets.UTF_8), 5L, 1000L, 7L, 2500L))));
    assertEquals("17", page.cursor());
    assertFalse(page.isLast());
    assertEquals(
        new OverrideEntry(
            "o", new OverrideValues(5, SECOND, OptionalLong.of(7), Optional.of(Duration.ofMillis(2500)))),
        page.entries().get(0));
  }

  @Test
  void unexpectedRepliesAreErrorsNotCrashes() {
    List<Object> bad =
        java.util.Arrays.asList(null, "x", List.of(1L), List.of(1L, "2", 3L, 4L, 5L, 6L));
    for (Object r : bad) {
      assertThrows(LibrlCommandException.class, () -> Replies.decision("RL.FIXED", r));
    }
    List<Object> badAll =
        java.util.Arrays.asList(null, List.of(1L, 0L), List.of(1L, 0L, "x"), List.of("1", 0L, List.of()));
    for (Object r : badAll) {
      assertThrows(LibrlCommandException.class, () -> Replies.all(r));
    }
    List<Object> badPages =
        java.util.Arrays.asList(
            null, List.of("x"), List.of(0L, "x"), List.of(0L, List.of(List.of("k", 1L))),
            List.of(0L, List.of(List.of(7L, 1L, 2L, 3L, 4L))),
            List.of(List.of(), List.of()));
    for (Object r : badPages) {
      assertThrows(LibrlCommandException.class, () -> Replies.page(r));
    }
    LibrlCommandException e =
        assertThrows(LibrlCommandException.class, () -> Replies.integer("RL.OVERRIDE DEL", "OK"));
    assertFalse(e.isServerError());
    assertNull(e.errorCode());
  }

  @Test
  void theDenialCacheAgesAndNeverOutlivesTheDenial() {
    DenialCache c = new DenialCache(2);
    long t0 = System.nanoTime();
    Decision d = new Decision(false, 3, Duration.ofMillis(500), 3, 0, Duration.ofMillis(800));
    c.keep("a", c.generation(), t0, t0, d.retryAfter(), d, List.of("k"));
    Decision aged = (Decision) c.lookup("a", t0 + 200_100_000L);
    assertEquals(Duration.ofMillis(300), aged.retryAfter());
    assertEquals(Duration.ofMillis(600), aged.resetAfter());
    assertNull(c.lookup("a", t0 + 500_000_000L), "answered at retry_after");
    // A denial sent before a forget is not kept.
    long gen = c.generation();
    c.forgetKey("x");
    c.keep("b", gen, t0, t0, SECOND, d, List.of("k"));
    assertEquals(0, c.size());
    // Full of live entries: a new one is not kept.
    c.keep("1", c.generation(), t0, t0, Duration.ofHours(1), d, List.of("k"));
    c.keep("2", c.generation(), t0, t0, Duration.ofHours(1), d, List.of("k"));
    c.keep("3", c.generation(), t0, t0, Duration.ofHours(1), d, List.of("k"));
    assertNull(c.lookup("3", t0));
    assertEquals(2, c.size());
    // A refund on k forgets both; an override change forgets everything.
    c.after(Calls.single(Fixed.of("k", 1, SECOND).refund(1)));
    assertEquals(0, c.size());
    AllDecision all =
        new AllDecision(false, SECOND, List.of(new Decision(false, 1, SECOND, 1, 0, Duration.ofSeconds(2))));
    c.keep("all", c.generation(), t0, t0, all.retryAfter(), all, List.of("k"));
    AllDecision agedAll = (AllDecision) c.lookup("all", t0 + 400_000_000L);
    assertEquals(Duration.ofMillis(600), agedAll.retryAfter());
    assertEquals(Duration.ofMillis(1600), agedAll.decisions().get(0).resetAfter());
    c.after(Calls.overrideSet(LimitOverride.of("o", 1, SECOND)));
    assertEquals(0, c.size());
    assertEquals(Decision.NEVER, DenialCache.left(Decision.NEVER, 5_000_000_000L));
  }

  @Test
  void theDenialCacheKeepsADenialAtMostItsMaxAge() {
    assertEquals(SECOND, new DenialCache().maxAge());
    assertEquals(SECOND, DenialCache.DEFAULT_MAX_AGE);
    DenialCache c = new DenialCache(10, Duration.ofMillis(300));
    long t0 = System.nanoTime();
    Decision blocked = new Decision(false, 1, Duration.ofHours(1), 1, 0, Duration.ofHours(1));
    c.keep("b", c.generation(), t0, t0 + 50_000_000L, blocked.retryAfter(), blocked, List.of("k"));
    Decision aged = (Decision) c.lookup("b", t0 + 299_000_000L);
    assertEquals(Duration.ofHours(1).minusMillis(249), aged.retryAfter(), "the reply ages from its arrival");
    assertNull(c.lookup("b", t0 + 300_000_000L), "kept past its max age, counted from the send");
    // A denial shorter than the max age goes at its retry_after.
    Decision brief = new Decision(false, 1, Duration.ofMillis(100), 1, 0, Duration.ofMillis(100));
    c.keep("s", c.generation(), t0, t0, brief.retryAfter(), brief, List.of("k"));
    assertNull(c.lookup("s", t0 + 100_000_000L));
    DenialCache forever = new DenialCache(1, Duration.ofDays(400_000));
    assertEquals(Duration.ofDays(400_000), forever.maxAge());
    forever.keep("b", forever.generation(), t0, t0, blocked.retryAfter(), blocked, List.of("k"));
    assertNull(forever.lookup("b", t0 + Duration.ofHours(1).toNanos()), "kept past its retry_after");
    assertThrows(IllegalArgumentException.class, () -> new DenialCache(1, Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> new DenialCache(1, Duration.ofNanos(999_999)));
    assertThrows(NullPointerException.class, () -> new DenialCache(1, null));
  }

  @Test
  void exceptionsSayWhatFailed() {
    DurabilityException e =
        new DurabilityException("RL.FIXED", null, 1, 0, Duration.ofMillis(100), null);
    assertEquals(
        "librl: RL.FIXED: NOTDURABLE the call reached 0 of 1 replicas within 100 ms", e.getMessage());
    assertThrows(IllegalStateException.class, e::decision);
    LibrlCommandException server =
        new LibrlCommandException("RL.TOKEN", new RuntimeException("WRONGTYPE Operation"), true);
    assertEquals("WRONGTYPE", server.errorCode());
    assertEquals("librl: RL.TOKEN: WRONGTYPE Operation", server.getMessage());
  }
}
