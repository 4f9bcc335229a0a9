%% @doc Parsers of Linux /proc files: the one implementation for the
%% statistics collector (throng_stats_os), throng-bench and the benchmark
%% scripts. Pure functions of the file contents (tested against captured
%% files), so that reading (see {@link throng_proc_sample} and
%% throng_stats_os, which keeps its files open) stays apart from parsing.
%%
%% Numbers in /proc are in the units the kernel chose: CPU times in clock
%% ticks (USER_HZ: {@link throng_proc_sample:clock_ticks/0}), resident
%% memory in pages or kB, TCP memory in pages. The parsers return them
%% unconverted; the readers convert.
-module(throng_proc).

-export([stat/1, host_stat/1, status/1, status/2, limits/1, netstat/1, netstat/2,
         sockstat/1, auxv/1]).
%% API used by tests: the whole-file parsers the targeted readers are checked against.
-ignore_xref([{status, 1}, {netstat, 1}]).

-type stat() :: #{utime := non_neg_integer(), stime := non_neg_integer(),
                  threads := non_neg_integer(), vsize := non_neg_integer(),
                  rss_pages := non_neg_integer()}.
-type host_stat() :: #{cpu := #{atom() => non_neg_integer()},
                       ctxt => non_neg_integer(), procs_running => non_neg_integer(),
                       procs_blocked => non_neg_integer()}.
-export_type([stat/0, host_stat/0]).

%% The fields of the "cpu" line of /proc/stat, in order (proc(5)).
-define(CPU_MODES, [user, nice, system, idle, iowait, irq, softirq, steal]).

%% @doc /proc/PID/stat (of this process or any other). The command name
%% (field 2) is in parentheses and may itself hold spaces and parentheses:
%% the fields are counted from the last ") ".
-spec stat(binary()) -> stat().
stat(Bin) ->
    Tail = lists:last(binary:split(Bin, <<") ">>, [global])),
    %% Tail starts at field 3 (state): field N is element N - 2.
    F = list_to_tuple(binary:split(trim(Tail), <<" ">>, [global, trim_all])),
    Int = fun(N) -> binary_to_integer(element(N - 2, F)) end,
    #{utime => Int(14), stime => Int(15), threads => Int(20), vsize => Int(23),
      rss_pages => Int(24)}.

%% @doc /proc/stat: the aggregate "cpu" line (ticks per mode, every CPU
%% together), context switches and runnable/blocked tasks of the host.
-spec host_stat(binary()) -> host_stat().
host_stat(Bin) ->
    lists:foldl(
      fun(Line, Acc) ->
              case words(Line) of
                  [<<"cpu">> | Ticks] ->
                      N = min(length(Ticks), length(?CPU_MODES)),
                      Modes = lists:sublist(?CPU_MODES, N),
                      Acc#{cpu => maps:from_list(
                                    lists:zip(Modes, [binary_to_integer(T)
                                                      || T <- lists:sublist(Ticks, N)]))};
                  [<<"ctxt">>, V] -> Acc#{ctxt => binary_to_integer(V)};
                  [<<"procs_running">>, V] -> Acc#{procs_running => binary_to_integer(V)};
                  [<<"procs_blocked">>, V] -> Acc#{procs_blocked => binary_to_integer(V)};
                  _ -> Acc
              end
      end, #{cpu => #{}}, lines(Bin)).

%% @doc /proc/PID/status (or /proc/PID/task/TID/status): every "Key: value"
%% line whose value is a number, with "kB" values in bytes.
-spec status(binary()) -> #{binary() => non_neg_integer()}.
status(Bin) ->
    lists:foldl(
      fun(Line, Acc) ->
              case binary:split(Line, <<":">>) of
                  [Key, Value] ->
                      case words(Value) of
                          [N, <<"kB">>] -> put_int(Key, N, 1024, Acc);
                          [N] -> put_int(Key, N, 1, Acc);
                          _ -> Acc
                      end;
                  _ ->
                      Acc
              end
      end, #{}, lines(Bin)).

%% @doc Only the named keys of a status file: a search for each key instead
%% of a parse of every line (the collector reads a status file per thread
%% each second and needs two numbers from it).
-spec status(binary(), [binary()]) -> #{binary() => non_neg_integer()}.
status(Bin, Keys) ->
    lists:foldl(
      fun(Key, Acc) ->
              case find_line(Bin, Key) of
                  nomatch -> Acc;
                  Value ->
                      case words(Value) of
                          [N, <<"kB">>] -> put_int(Key, N, 1024, Acc);
                          [N] -> put_int(Key, N, 1, Acc);
                          _ -> Acc
                      end
              end
      end, #{}, Keys).

%% The rest of the line that starts with "Key:".
find_line(Bin, Key) ->
    Prefix = <<Key/binary, ":">>,
    Start = case Bin of
                <<Prefix:(byte_size(Prefix))/binary, _/binary>> -> {ok, byte_size(Prefix)};
                _ -> case binary:match(Bin, <<"\n", Prefix/binary>>) of
                         {Pos, Len} -> {ok, Pos + Len};
                         nomatch -> nomatch
                     end
            end,
    case Start of
        {ok, From} ->
            Rest = binary:part(Bin, From, byte_size(Bin) - From),
            case binary:match(Rest, <<"\n">>) of
                {End, _} -> binary:part(Rest, 0, End);
                nomatch -> Rest
            end;
        nomatch ->
            nomatch
    end.

put_int(Key, N, Mult, Acc) ->
    try Acc#{Key => binary_to_integer(N) * Mult}
    catch error:badarg -> Acc
    end.

%% @doc /proc/PID/limits: the soft and hard open-file limits.
-spec limits(binary()) -> #{max_open_files => {Soft :: limit(), Hard :: limit()}}.
limits(Bin) ->
    lists:foldl(
      fun(<<"Max open files", Rest/binary>>, Acc) ->
              case words(Rest) of
                  [Soft, Hard | _] -> Acc#{max_open_files => {limit(Soft), limit(Hard)}};
                  _ -> Acc
              end;
         (_, Acc) -> Acc
      end, #{}, lines(Bin)).

-type limit() :: non_neg_integer() | infinity.

limit(<<"unlimited">>) -> infinity;
limit(N) -> binary_to_integer(N).

%% @doc /proc/net/netstat (or /proc/net/snmp): pairs of lines, a header of
%% names then a line of values, both prefixed with the group ("TcpExt:").
-spec netstat(binary()) -> #{binary() => #{binary() => integer()}}.
netstat(Bin) ->
    pairs(lines(Bin), #{}).

%% @doc One group of /proc/net/netstat ("TcpExt"), without parsing the
%% others.
-spec netstat(binary(), binary()) -> #{binary() => integer()}.
netstat(Bin, Group) ->
    Prefix = <<Group/binary, ":">>,
    case [L || L <- lines(Bin), binary:longest_common_prefix([L, Prefix]) =:= byte_size(Prefix)] of
        [Names, Values | _] ->
            maps:get(Group, pairs([Names, Values], #{}), #{});
        _ ->
            #{}
    end.

pairs([Names, Values | Rest], Acc) ->
    case {words(Names), words(Values)} of
        {[Group | Ns], [Group | Vs]} when length(Ns) =:= length(Vs) ->
            Key = binary:part(Group, 0, byte_size(Group) - 1),   %% drop the ':'
            M = maps:from_list(lists:zip(Ns, [binary_to_integer(V) || V <- Vs])),
            pairs(Rest, Acc#{Key => M});
        _ ->
            pairs([Values | Rest], Acc)
    end;
pairs(_, Acc) ->
    Acc.

%% @doc /proc/net/sockstat: "TCP: inuse 5 orphan 0 tw 3 alloc 7 mem 1" and
%% the like, as #{<<"TCP">> => #{<<"inuse">> => 5, ...}}.
-spec sockstat(binary()) -> #{binary() => #{binary() => integer()}}.
sockstat(Bin) ->
    lists:foldl(
      fun(Line, Acc) ->
              case words(Line) of
                  [Group | KVs] when KVs =/= [] ->
                      Key = binary:part(Group, 0, byte_size(Group) - 1),
                      Acc#{Key => kv(KVs, #{})};
                  _ -> Acc
              end
      end, #{}, lines(Bin)).

kv([K, V | Rest], Acc) -> kv(Rest, Acc#{K => binary_to_integer(V)});
kv(_, Acc) -> Acc.

%% @doc /proc/PID/auxv, the ELF auxiliary vector: pairs of native-endian
%% machine words (type, value), ending with type 0. Type 6 is the page size,
%% 17 the clock ticks per second (USER_HZ) that /proc times are counted in.
-spec auxv(binary()) -> #{non_neg_integer() => non_neg_integer()}.
auxv(Bin) ->
    auxv(Bin, #{}).

auxv(<<0:64/native, _:64/native, _/binary>>, Acc) -> Acc;
auxv(<<Type:64/native, Value:64/native, Rest/binary>>, Acc) -> auxv(Rest, Acc#{Type => Value});
auxv(_, Acc) -> Acc.

lines(Bin) ->
    binary:split(Bin, <<"\n">>, [global, trim_all]).

words(Bin) ->
    binary:split(Bin, [<<" ">>, <<"\t">>, <<"\n">>], [global, trim_all]).

trim(Bin) ->
    string:trim(Bin, both, " \n").
