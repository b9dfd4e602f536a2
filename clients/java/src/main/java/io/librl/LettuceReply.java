package io.librl;

import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.CommandOutput;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A reply of any shape, as {@link Replies} reads it: arrays as lists (nested as deep as they go),
 * integers as {@code Long}, strings as {@code String}, nil as null, in RESP2 and RESP3 alike.
 */
final class LettuceReply extends CommandOutput<String, String, Object> {
  /**
   * The arrays still being filled, the outermost first, {@code depth} of them: a plain array,
   * as most replies nest two deep at most (RL.ALL's).
   */
  @SuppressWarnings({"unchecked", "rawtypes"}) // an array of a generic type is made raw
  private List<Object>[] open = new List[2];

  private int depth;

  LettuceReply() {
    super(StringCodec.UTF8, null);
  }

  private void add(Object value) {
    if (depth == 0) {
      output = value;
    } else {
      open[depth - 1].add(value);
    }
  }

  @Override
  public void set(long integer) {
    add(integer);
  }

  @Override
  public void set(ByteBuffer bytes) {
    add(bytes == null ? null : StandardCharsets.UTF_8.decode(bytes).toString());
  }

  @Override
  public void setSingle(ByteBuffer bytes) {
    set(bytes);
  }

  @Override
  public void set(double number) {
    add(number);
  }

  @Override
  public void set(boolean value) {
    add(value);
  }

  @Override
  public void multi(int count) {
    if (count < 0) {
      add(null); // RESP2's null array
      return;
    }
    List<Object> array = new ArrayList<>(count);
    add(array);
    if (depth == open.length) {
      open = Arrays.copyOf(open, depth * 2);
    }
    open[depth++] = array;
  }

  /** Called as each element ends, with the depth of the arrays still open around it. */
  @Override
  public void complete(int depth) {
    while (this.depth > depth) {
      open[--this.depth] = null;
    }
  }
}
