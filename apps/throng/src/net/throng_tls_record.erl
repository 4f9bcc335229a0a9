%% @doc The TLS record layer after the handshake (RFC 8446 §5, RFC 5246
%% §6.2 with the AEAD suites of RFC 5288 and RFC 7905): application data
%% in and out, alerts, TLS 1.3 KeyUpdate, a refused TLS 1.2 renegotiation.
%%
%% Why here and not in OpenSSL: an idle connection's OpenSSL state is
%% about 16 KB (the SSL object, cipher contexts, session, buffers); this
%% state is the traffic keys and two counters, a few hundred bytes in the
%% connection's own process, and a partial record only while one is
%% arriving. Records are sealed and opened with the crypto application's
%% one-shot AEAD (AES-GCM, ChaCha20-Poly1305).
%%
%% The write sequence number lives in an atomics array, not in the term:
%% a stale copy of the state can never seal two records with one nonce.
%% The read side (sequence, partial record, key) is threaded through
%% {@link open/2}.
%%
%% Key usage limits (RFC 8446 §5.5: an AES-GCM key protects at most
%% 2^24.5 full-size records): after 2^23 records under one write key, the
%% next bytes read from the peer also send a KeyUpdate (TLS 1.3, with
%% update_not_requested) and the records after it use the next key. No
%% write key seals more than 2^24 records: beyond, {@link seal/2} refuses
%% and the connection ends (a TLS 1.2 connection cannot change its keys:
%% renegotiation is refused). ChaCha20-Poly1305 has no such limit.
-module(throng_tls_record).

-export([new/1, seal/2, open/2, close_notify/1]).
%% The peer's view of a connection (a client without sockets) and lowered
%% limits: for tests. What a state has sealed under its write key.
-export([mirror/1, set_limits/2, reset_limits/0, written/1]).
-ignore_xref([{mirror, 1}, {set_limits, 2}, {reset_limits, 0}]).

-define(MAX_PLAIN, 16384).
-define(CT_CCS, 20).
-define(CT_ALERT, 21).
-define(CT_HANDSHAKE, 22).
-define(CT_APP, 23).
-define(HS_KEY_UPDATE, 24).
-define(HS_CLIENT_HELLO, 1).
-define(TAG, 16).
%% Records under one write key: renewed after SOFT (at the next read),
%% never more than HARD.
-define(SOFT, (1 bsl 23)).
-define(HARD, (1 bsl 24)).
-define(LIMITS, {?MODULE, limits}).

-record(dir, {aead :: throng_tls_kdf:aead(),
              key :: binary(),
              iv :: binary(),
              secret :: binary() | undefined}).    % TLS 1.3: for KeyUpdate
-record(tls, {version :: tls12 | tls13,
              suite :: atom(),
              read :: #dir{},
              rseq = 0 :: non_neg_integer(),
              write :: #dir{},
              wseq :: atomics:atomics_ref(),
              wbase = 0 :: integer(),
              buf = <<>> :: binary(),              % a partial record
              hs = <<>> :: binary(),               % a partial handshake message
              closed = false :: boolean()}).
-opaque state() :: #tls{}.
-type alert() :: close_notify | unexpected_message | bad_record_mac | record_overflow |
                 decode_error | no_renegotiation.
-export_type([state/0, alert/0]).

%% @doc The record layer of a connection whose handshake just finished
%% ({@link throng_tls_nif:handshake/2}'s info).
-spec new(throng_tls_nif:info()) -> state().
new(#{version := tls13, cipher := Suite, client_secret := CS, server_secret := SS,
      write_records := Written}) ->
    {Aead, Hash, KeyLen} = throng_tls_kdf:suite(Suite),
    Dir = fun(Secret) ->
                  {Key, IV} = throng_tls_kdf:tls13_keys(Hash, Secret, KeyLen),
                  #dir{aead = Aead, key = Key, iv = IV, secret = Secret}
          end,
    #tls{version = tls13, suite = Suite, read = Dir(CS), write = Dir(SS),
         wseq = counter(Written)};
new(#{version := tls12, cipher := Suite, master_secret := MS, client_random := CR,
      server_random := SR}) ->
    {Aead, _Hash, _} = throng_tls_kdf:suite(Suite),
    {CK, CIV, SK, SIV} = throng_tls_kdf:tls12_keys(Suite, MS, CR, SR),
    %% Each side's Finished was the first record under the new keys.
    #tls{version = tls12, suite = Suite, read = #dir{aead = Aead, key = CK, iv = CIV},
         write = #dir{aead = Aead, key = SK, iv = SIV}, rseq = 1, wseq = counter(1)}.

counter(Start) ->
    Ref = atomics:new(1, [{signed, false}]),
    ok = atomics:put(Ref, 1, Start),
    Ref.

%% @doc The same connection seen from the other end: read and write keys
%% swapped, each side's next sequence number where the other expects it.
-spec mirror(state()) -> state().
mirror(#tls{read = R, rseq = RSeq, write = W, wseq = Ref, wbase = Base} = S) ->
    S#tls{read = W, rseq = atomics:get(Ref, 1) - Base, write = R, wseq = counter(RSeq),
          wbase = 0, buf = <<>>, hs = <<>>}.

%% @doc Application data as records, ready for the socket; `{error,
%% key_limit}' (nothing sealed) when they would take the write key past
%% its limit.
-spec seal(iodata(), state()) -> iodata() | {error, key_limit}.
seal(Data, S) ->
    Bin = iolist_to_binary(Data),
    Records = max(1, (byte_size(Bin) + ?MAX_PLAIN - 1) div ?MAX_PLAIN),
    case limits(S) of
        {_Soft, Hard} ->
            case written(S) + Records > Hard of
                true -> {error, key_limit};
                false -> seal_fragments(Bin, S)
            end;
        none ->
            seal_fragments(Bin, S)
    end.

%% @doc The records sealed under the current write key.
-spec written(state()) -> non_neg_integer().
written(#tls{wseq = Ref, wbase = Base}) ->
    atomics:get(Ref, 1) - Base.

%% The write key's limits: none for ChaCha20-Poly1305.
limits(#tls{write = #dir{aead = chacha20_poly1305}}) -> none;
limits(_S) -> persistent_term:get(?LIMITS, {?SOFT, ?HARD}).

%% @doc Lowers the limits for a test: renew after Soft records, refuse
%% after Hard.
-spec set_limits(pos_integer(), pos_integer()) -> ok.
set_limits(Soft, Hard) when Soft < Hard ->
    persistent_term:put(?LIMITS, {Soft, Hard}).

%% @doc Back to RFC 8446's limits.
-spec reset_limits() -> ok.
reset_limits() ->
    _ = persistent_term:erase(?LIMITS),
    ok.

seal_fragments(<<Chunk:?MAX_PLAIN/binary, Rest/binary>>, S) when Rest =/= <<>> ->
    [record(?CT_APP, Chunk, S) | seal_fragments(Rest, S)];
seal_fragments(Bin, S) ->
    [record(?CT_APP, Bin, S)].

%% @doc The close_notify alert (RFC 8446 §6.1).
-spec close_notify(state()) -> iodata().
close_notify(S) -> alert(close_notify, S).

%% An alert record: close_notify and no_renegotiation are warnings, the
%% rest fatal.
-spec alert(alert(), state()) -> iodata().
alert(Alert, S) ->
    Level = case Alert of
                close_notify -> 1;
                no_renegotiation -> 1;
                _ -> 2
            end,
    record(?CT_ALERT, <<Level, (alert_code(Alert))>>, S).

alert_code(close_notify) -> 0;
alert_code(unexpected_message) -> 10;
alert_code(bad_record_mac) -> 20;
alert_code(record_overflow) -> 22;
alert_code(decode_error) -> 50;
alert_code(no_renegotiation) -> 100.

next_wseq(#tls{wseq = Ref, wbase = Base}) ->
    atomics:add_get(Ref, 1, 1) - 1 - Base.

record(Type, Plain, #tls{version = tls13, write = W} = S) ->
    Seq = next_wseq(S),
    Inner = <<Plain/binary, Type>>,
    Header = <<?CT_APP, 3, 3, (byte_size(Inner) + ?TAG):16>>,
    {C, Tag} = crypto:crypto_one_time_aead(W#dir.aead, W#dir.key, nonce(W#dir.iv, Seq), Inner,
                                          Header, ?TAG, true),
    [Header, C, Tag];
record(Type, Plain, #tls{version = tls12, write = W} = S) ->
    Seq = next_wseq(S),
    Len = byte_size(Plain),
    AAD = <<Seq:64, Type, 3, 3, Len:16>>,
    case W#dir.aead of
        chacha20_poly1305 ->
            {C, Tag} = crypto:crypto_one_time_aead(chacha20_poly1305, W#dir.key,
                                                  nonce(W#dir.iv, Seq), Plain, AAD, ?TAG, true),
            [<<Type, 3, 3, (Len + ?TAG):16>>, C, Tag];
        Aead ->
            Explicit = <<Seq:64>>,
            {C, Tag} = crypto:crypto_one_time_aead(Aead, W#dir.key, <<(W#dir.iv)/binary, Explicit/binary>>,
                                                  Plain, AAD, ?TAG, true),
            [<<Type, 3, 3, (8 + Len + ?TAG):16>>, Explicit, C, Tag]
    end.

%% The per-record nonce: the IV XOR the sequence number, left-padded.
nonce(IV, Seq) ->
    crypto:exor(IV, <<0:(8 * byte_size(IV) - 64), Seq:64>>).

%% @doc Bytes read from the peer: the application data they complete, what
%% to send back (a KeyUpdate answer, an alert), and the new state. With the
%% peer's close_notify: `closed', the data before it, and Out holds our
%% close_notify; what followed it is dropped. A record that does not decrypt, or breaks the protocol,
%% gives an error and the fatal alert to send.
-spec open(binary(), state()) ->
    {ok, Plain :: binary(), Out :: iodata(), state()} |
    {closed, Plain :: binary(), Out :: iodata()} |
    {error, closed | {alert, alert() | {peer, non_neg_integer()}}, Out :: iodata()}.
open(_Bytes, #tls{closed = true}) ->
    {error, closed, []};
open(Bytes, #tls{buf = <<>>} = S) ->
    records(Bytes, S, [], []);
open(Bytes, #tls{buf = Buf} = S) ->
    records(<<Buf/binary, Bytes/binary>>, S#tls{buf = <<>>}, [], []).

records(<<Type, 3, _, Len:16, Rest/binary>> = Bin, S, Plain, Out) ->
    case Len > max_record(S) of
        true ->
            fatal(record_overflow, S, Out);
        false when byte_size(Rest) < Len ->
            done(S#tls{buf = Bin}, Plain, Out);
        false ->
            <<Body:Len/binary, More/binary>> = Rest,
            case unseal(Type, Len, Body, S) of
                {ok, InnerType, Data, S1} ->
                    case content(InnerType, Data, S1) of
                        {data, D, S2} -> records(More, S2, [Plain, D], Out);
                        {send, O, S2} -> records(More, S2, Plain, [Out, O]);
                        {close, O, S2} -> done(S2, Plain, [Out, O]);
                        {fatal, Alert, S2} -> fatal(Alert, S2, Out);
                        {peer_fatal, Desc} -> {error, {alert, {peer, Desc}}, Out}
                    end;
                {error, Alert} ->
                    fatal(Alert, S, Out)
            end
    end;
records(<<>>, S, Plain, Out) ->
    done(S, Plain, Out);
records(<<Type, Rest/binary>> = Bin, S, Plain, Out)
  when byte_size(Bin) < 5, Type >= ?CT_CCS, Type =< ?CT_APP, (Rest =:= <<>> orelse binary_part(Rest, 0, 1) =:= <<3>>) ->
    %% The start of a record header.
    done(S#tls{buf = Bin}, Plain, Out);
records(_Bin, S, _Plain, Out) ->
    fatal(decode_error, S, Out).

done(#tls{closed = true}, Plain, Out) ->
    {closed, iolist_to_binary(Plain), Out};
done(S, Plain, Out) ->
    {Out1, S1} = renew(Out, S),
    {ok, iolist_to_binary(Plain), Out1, S1}.

%% A TLS 1.3 write key that has sealed SOFT records is renewed: a KeyUpdate
%% under it, the next key for what follows (RFC 8446 §4.6.3).
renew(Out, #tls{version = tls13, write = W, wseq = Ref} = S) ->
    case limits(S) of
        {Soft, _Hard} ->
            case written(S) >= Soft of
                true ->
                    Update = record(?CT_HANDSHAKE, <<?HS_KEY_UPDATE, 1:24, 0>>, S),
                    {[Out, Update], S#tls{write = next_key(W, S), wbase = atomics:get(Ref, 1)}};
                false ->
                    {Out, S}
            end;
        none ->
            {Out, S}
    end;
renew(Out, S) ->
    {Out, S}.

fatal(Alert, S, Out) ->
    {error, {alert, Alert}, [Out, alert(Alert, S)]}.

max_record(#tls{version = tls13}) -> ?MAX_PLAIN + 256;
max_record(#tls{version = tls12}) -> ?MAX_PLAIN + 2048.

%% TLS 1.3: every record after the handshake is application_data outside;
%% the real type is the last non-zero byte inside.
unseal(?CT_APP, Len, Body, #tls{version = tls13, read = R, rseq = Seq} = S) when Len >= ?TAG + 1 ->
    CLen = Len - ?TAG,
    <<C:CLen/binary, Tag:?TAG/binary>> = Body,
    Header = <<?CT_APP, 3, 3, Len:16>>,
    case crypto:crypto_one_time_aead(R#dir.aead, R#dir.key, nonce(R#dir.iv, Seq), C, Header,
                                     Tag, false) of
        error ->
            {error, bad_record_mac};
        Inner when byte_size(Inner) > ?MAX_PLAIN + 1 ->
            {error, record_overflow};
        Inner ->
            case strip(Inner, byte_size(Inner)) of
                {Type, Data} -> {ok, Type, Data, S#tls{rseq = Seq + 1}};
                none -> {error, unexpected_message}
            end
    end;
unseal(_Type, _Len, _Body, #tls{version = tls13}) ->
    {error, unexpected_message};
unseal(Type, Len, Body, #tls{version = tls12, read = R, rseq = Seq} = S) ->
    Opened = case R#dir.aead of
                 chacha20_poly1305 when Len >= ?TAG ->
                     CLen = Len - ?TAG,
                     <<C:CLen/binary, Tag:?TAG/binary>> = Body,
                     {C, Tag, nonce(R#dir.iv, Seq)};
                 chacha20_poly1305 ->
                     short;
                 _ when Len >= 8 + ?TAG ->
                     CLen = Len - 8 - ?TAG,
                     <<Explicit:8/binary, C:CLen/binary, Tag:?TAG/binary>> = Body,
                     {C, Tag, <<(R#dir.iv)/binary, Explicit/binary>>};
                 _ ->
                     short
             end,
    case Opened of
        short ->
            {error, bad_record_mac};
        {C1, Tag1, Nonce} ->
            AAD = <<Seq:64, Type, 3, 3, (byte_size(C1)):16>>,
            case crypto:crypto_one_time_aead(R#dir.aead, R#dir.key, Nonce, C1, AAD, Tag1, false) of
                error -> {error, bad_record_mac};
                Plain when byte_size(Plain) > ?MAX_PLAIN -> {error, record_overflow};
                Plain -> {ok, Type, Plain, S#tls{rseq = Seq + 1}}
            end
    end.

%% TLSInnerPlaintext: content, type, zero padding.
strip(_Inner, 0) -> none;
strip(Inner, N) ->
    case binary:at(Inner, N - 1) of
        0 -> strip(Inner, N - 1);
        Type -> {Type, binary:part(Inner, 0, N - 1)}
    end.

content(Type, _Data, #tls{version = tls13, hs = Hs} = S) when Hs =/= <<>>,
                                                               Type =/= ?CT_HANDSHAKE ->
    %% A handshake message split over records must not be interleaved with
    %% other records (RFC 8446 §5.1).
    {fatal, unexpected_message, S};
content(?CT_APP, Data, S) ->
    {data, Data, S};
content(?CT_ALERT, <<_Level, 0>>, S) ->
    %% close_notify: answered with ours; nothing more is read.
    {close, close_notify(S), S#tls{closed = true}};
content(?CT_ALERT, <<1, _Desc>>, #tls{version = tls12} = S) ->
    %% A TLS 1.2 warning (e.g. no_renegotiation): nothing to do.
    {send, [], S};
content(?CT_ALERT, <<_Level, Desc>>, _S) ->
    %% A fatal alert from the peer ends the connection, with nothing sent
    %% back (RFC 8446 §6.2).
    {peer_fatal, Desc};
content(?CT_HANDSHAKE, Data, #tls{hs = Hs} = S) ->
    handshake(<<Hs/binary, Data/binary>>, S#tls{hs = <<>>}, []);
content(_Type, _Data, S) ->
    {fatal, unexpected_message, S}.

handshake(<<?HS_KEY_UPDATE, Len:24, _:Len/binary, More/binary>>, #tls{version = tls13} = S, _Out)
  when More =/= <<>> ->
    %% A KeyUpdate changes the read key: it must end its record (RFC 8446
    %% §5.1), nothing may follow it under the old key.
    {fatal, unexpected_message, S};
handshake(<<MsgType, Len:24, Body:Len/binary, More/binary>>, S, Out) ->
    case post_handshake(MsgType, Body, S) of
        {send, O, S1} -> handshake(More, S1, [Out, O]);
        {fatal, _, _} = F -> F
    end;
handshake(<<>>, S, Out) ->
    {send, Out, S};
handshake(Partial, S, Out) when byte_size(Partial) < 4 + 16 ->
    %% Split across records; no message after a handshake is long.
    {send, Out, S#tls{hs = Partial}};
handshake(_Partial, S, _Out) ->
    {fatal, unexpected_message, S}.

%% TLS 1.3 KeyUpdate: the peer's next records use its next key; when it asks,
%% ours is updated too (after telling it, under the old key).
post_handshake(?HS_KEY_UPDATE, <<Req>>, #tls{version = tls13, read = R} = S) when Req =< 1 ->
    S1 = S#tls{read = next_key(R, S), rseq = 0},
    case Req of
        0 -> {send, [], S1};
        1 ->
            Answer = record(?CT_HANDSHAKE, <<?HS_KEY_UPDATE, 1:24, 0>>, S1),
            #tls{write = W, wseq = Ref} = S1,
            {send, Answer, S1#tls{write = next_key(W, S1), wbase = atomics:get(Ref, 1)}}
    end;
post_handshake(?HS_CLIENT_HELLO, _Body, #tls{version = tls12} = S) ->
    %% Renegotiation is refused (RFC 5746 §4.2): a warning, and the
    %% connection goes on with its keys.
    {send, alert(no_renegotiation, S), S};
post_handshake(_Type, _Body, S) ->
    {fatal, unexpected_message, S}.

next_key(#dir{aead = Aead, secret = Secret} = D, #tls{suite = Suite}) ->
    {_, Hash, KeyLen} = throng_tls_kdf:suite(Suite),
    Next = throng_tls_kdf:expand_label(Hash, Secret, <<"traffic upd">>, <<>>, byte_size(Secret)),
    {Key, IV} = throng_tls_kdf:tls13_keys(Hash, Next, KeyLen),
    D#dir{aead = Aead, key = Key, iv = IV, secret = Next}.
