%% @doc `throng-bench soak-report': the verdict of a soak run (bench/soak.sh)
%% from its parts: the server samples taken every few seconds (samples.csv:
%% t_s, rss_bytes, beam_bytes, processes, sessions, offline), the summary of
%% the load run (main/summary.json) and of the drain run that logs every user
%% in once more to collect what was stored offline (drain/summary.json).
%%
%% <ul>
%% <li><b>drift</b>: server RSS and BEAM total memory at the reference point
%%   against the last sample before the users start leaving. The reference
%%   is 10 minutes into the run, or, for runs whose steady part is shorter
%%   than 20 minutes, the middle of the steady part (all users online);</li>
%% <li><b>lost</b>: sent − received in the load run − received in the drain
%%   run − bounced (a bounce is an answer, not a loss; counted apart) − what
%%   is still held offline after the drain;</li>
%% <li><b>errors</b>: both runs' errors.</li>
%% </ul>
%% Pass: drift below the target (2 %) for RSS and BEAM memory, 0 errors, 0 lost.
-module(throng_bench_soak).

-export([report/1]).

-type opts() :: #{dir := file:filename(), steady_from_s := number(), steady_to_s := number(),
                  drift_target := float()}.

%% @doc Reads DIR/samples.csv, DIR/main/summary.json, DIR/drain/summary.json;
%% writes DIR/soak.json and DIR/rss.svg; returns the summary.
-spec report(opts()) -> {pass | fail, map()}.
report(#{dir := Dir, steady_from_s := From, steady_to_s := To, drift_target := Target}) ->
    Samples = samples(filename:join(Dir, "samples.csv")),
    Main = json(filename:join([Dir, "main", "summary.json"])),
    Drain = json(filename:join([Dir, "drain", "summary.json"])),
    RefT = case To - From >= 20 * 60 of
               true -> 10 * 60;
               false -> (From + To) / 2
           end,
    Ref = at(Samples, RefT),
    End = at(Samples, To),
    Drift = fun(K) -> pct(maps:get(K, Ref), maps:get(K, End)) end,
    Msg = fun(S, K) -> maps:get(K, maps:get(<<"messages">>, S, #{}), 0) end,
    Err = fun(S) -> maps:get(<<"total">>, maps:get(<<"errors">>, S, #{}), 0) end,
    Sent = Msg(Main, <<"sent">>),
    Recv1 = Msg(Main, <<"received">>),
    Recv2 = Msg(Drain, <<"received">>),
    Bounced = Msg(Main, <<"bounced">>),
    OfflineLeft = maps:get(offline, lists:last(Samples)),
    Lost = Sent - Recv1 - Recv2 - Bounced - OfflineLeft,
    Errors = Err(Main) + Err(Drain),
    RssDrift = Drift(rss), BeamDrift = Drift(beam),
    Pass = abs(RssDrift) < Target andalso abs(BeamDrift) < Target andalso Errors =:= 0
        andalso Lost =:= 0 andalso Bounced =:= 0,
    Summary = #{verdict => case Pass of true -> pass; false -> fail end,
                targets => #{drift_pct => Target, errors => 0, lost => 0},
                reference_s => RefT, end_s => To,
                rss_bytes => #{reference => maps:get(rss, Ref), 'end' => maps:get(rss, End),
                               drift_pct => RssDrift},
                beam_bytes => #{reference => maps:get(beam, Ref), 'end' => maps:get(beam, End),
                                drift_pct => BeamDrift},
                processes => #{reference => maps:get(processes, Ref), 'end' => maps:get(processes, End),
                               drift => maps:get(processes, End) - maps:get(processes, Ref)},
                sessions => #{reference => maps:get(sessions, Ref), 'end' => maps:get(sessions, End)},
                messages => #{sent => Sent, received => Recv1, received_from_offline => Recv2,
                              bounced => Bounced, offline_left => OfflineLeft, lost => Lost},
                errors => #{main => Err(Main), drain => Err(Drain)},
                users_logged_in => maps:get(<<"logged_in">>, maps:get(<<"users">>, Main, #{}), 0)},
    ok = file:write_file(filename:join(Dir, "soak.json"), throng_bench_out:encode_json(Summary)),
    ok = file:write_file(filename:join(Dir, "rss.svg"), svg(Samples, RefT, To)),
    {case Pass of true -> pass; false -> fail end, Summary}.

svg(Samples, RefT, To) ->
    Mib = fun(B) -> B / 1048576 end,
    Chart = throng_bench_svg:line_chart(
              #{title => io_lib:format("server memory (reference ~bs, end ~bs)", [round(RefT), round(To)]),
                x_label => "seconds", y_label => "MiB",
                series => [{"RSS", [{T, Mib(R)} || #{t := T, rss := R} <- Samples]},
                           {"BEAM total", [{T, Mib(B)} || #{t := T, beam := B} <- Samples]}]}),
    [<<"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n">>, Chart].

pct(A, B) when is_number(A), is_number(B), A > 0 -> round((B - A) / A * 10000) / 100;
pct(_, _) -> null.

%% The last sample at or before T (the first one if none).
at([First | _] = Samples, T) ->
    case [S || #{t := St} = S <- Samples, St =< T] of
        [] -> First;
        Before -> lists:last(Before)
    end.

samples(File) ->
    {ok, Bin} = file:read_file(File),
    [_Header | Lines] = [L || L <- binary:split(Bin, <<"\n">>, [global]), L =/= <<>>],
    [begin
         [T, Rss, Beam, P, S, O] = [num(X) || X <- binary:split(L, <<",">>, [global])],
         #{t => T, rss => Rss, beam => Beam, processes => P, sessions => S, offline => O}
     end || L <- Lines].

num(<<>>) -> 0;
num(X) ->
    try binary_to_integer(X)
    catch error:badarg -> binary_to_float(X)
    end.

json(File) ->
    case file:read_file(File) of
        {ok, Bin} -> jiffy:decode(Bin, [return_maps]);
        {error, _} -> #{}
    end.
