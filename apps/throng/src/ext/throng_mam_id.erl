%% @doc Archive ids (XEP-0313) and the stanza ids that name them
%% (XEP-0359).
%%
%% An archive id is the time a message was archived in microseconds since
%% the epoch, greater on this node than any it gave before ({@link next/0}:
%% a compare-and-swap on one atomics cell, no process): the archive's order
%% is the order of ids. Storage moves an id on by one when another node took
%% it in the same microsecond.
%%
%% Clients see an id encrypted ({@link encode/2}): XEP-0359 wants ids from
%% which an observer can infer nothing (not the time, not the size of the
%% archive), and XEP-0313 wants them unpredictable. The 64-bit id and 64
%% zero bits make one AES-128 block under a key kept in storage (the same
%% for every node and every restart, so an id stays valid); the 16 bytes
%% are sent as 22 characters of URL-safe base64. {@link decode/2} gives the
%% id back only for a string that decrypts to zeros in its low half: a
%% forged or mangled id is refused (one chance in 2^64 of being taken for an
%% id, which then only names a message that the archive does not hold).
-module(throng_mam_id).

-export([next/0, encode/2, decode/2, new_key/0]).

-define(LAST, {?MODULE, last}).

%% @doc A new id: now, in microseconds, or one more than the last id this
%% node gave when the clock has not moved on (or went back).
-spec next() -> pos_integer().
next() ->
    Ref = last_ref(),
    Last = atomics:get(Ref, 1),
    Id = max(os:system_time(microsecond), Last + 1),
    case atomics:compare_exchange(Ref, 1, Last, Id) of
        ok -> Id;
        _Moved -> next()
    end.

%% The cell is made once per node and kept (a persistent_term that is put
%% once is never replaced: no global garbage collection).
last_ref() ->
    case persistent_term:get(?LAST, undefined) of
        undefined ->
            global:trans({?LAST, self()}, fun() ->
                case persistent_term:get(?LAST, undefined) of
                    undefined ->
                        Ref = atomics:new(1, [{signed, true}]),
                        persistent_term:put(?LAST, Ref),
                        Ref;
                    Ref -> Ref
                end
            end, [node()]);
        Ref ->
            Ref
    end.

%% @doc A new random key.
-spec new_key() -> binary().
new_key() ->
    crypto:strong_rand_bytes(16).

%% @doc The id as clients see it.
-spec encode(binary(), non_neg_integer()) -> binary().
encode(Key, Id) when Id >= 0, Id < 1 bsl 64 ->
    Block = crypto:crypto_one_time(aes_128_ecb, Key, <<Id:64, 0:64>>, true),
    url_safe(base64:encode(Block)).

%% @doc The id a client sent, or `error' for a string this server did not
%% make.
-spec decode(binary(), binary()) -> {ok, non_neg_integer()} | error.
decode(Key, Text) when byte_size(Text) =:= 22 ->
    try base64:decode(<<(from_url_safe(Text))/binary, "==">>) of
        Block when byte_size(Block) =:= 16 ->
            case crypto:crypto_one_time(aes_128_ecb, Key, Block, false) of
                <<Id:64, 0:64>> -> {ok, Id};
                _ -> error
            end;
        _ -> error
    catch
        error:_ -> error
    end;
decode(_Key, _Text) ->
    error.

%% 16 bytes are 22 characters and "==" of base64; + and / become - and _.
url_safe(<<Text:22/binary, "==">>) ->
    binary:replace(binary:replace(Text, <<"+">>, <<"-">>, [global]), <<"/">>, <<"_">>, [global]).

%% A + or / (not URL-safe base64) becomes a character base64 refuses.
from_url_safe(Text) ->
    case binary:match(Text, [<<"+">>, <<"/">>]) of
        nomatch ->
            binary:replace(binary:replace(Text, <<"-">>, <<"+">>, [global]), <<"_">>, <<"/">>,
                           [global]);
        _ ->
            <<"!">>
    end.
