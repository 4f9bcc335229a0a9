%% @doc The simulated user population: names, passwords and contacts.
%%
%% Users are numbered first .. first+count-1. Names and passwords come from
%% patterns where %N stands for the number ("user%N", "password%N"), or from
%% a CSV file of `username,password' lines (user N is line N). The contact
%% rule `neighbours' with contact_count C gives user number first+i the
%% users first+((i+d) mod count) for d in -C/2..-1 and 1..C/2: an 18-contact
%% mutual roster like ProcessOne's benchmark (user N and users N+-1..9,
%% wrapping around). Servers' bulk registration must create the same rosters.
-module(throng_bench_xmpp_users).

-export([compile/1, name/2, password/2, number_of/2, contacts/2, read_csv/1]).
%% API used by tests: the contact rule of docs/bench.md and the CSV reader.
-ignore_xref([{contacts, 2}, {read_csv, 1}]).

-export_type([users/0]).

-type users() :: #{first := non_neg_integer(), count := pos_integer(),
                   name := {binary(), binary()} | csv, password := [binary() | n] | csv,
                   csv := tuple() | none, csv_index := #{binary() => pos_integer()} | none,
                   half := non_neg_integer()}.

%% @doc Prepare the users section of a scenario (reads the CSV file).
-spec compile(map()) -> users().
compile(U = #{first := First, count := Count0, contacts := Rule, contact_count := CC}) ->
    {Csv, Index, Count, First1} =
        case maps:get(csv, U, none) of
            none -> {none, none, Count0, First};
            File ->
                Rows = read_csv(File),
                {list_to_tuple(Rows),
                 maps:from_list([{Name, I} || {I, {Name, _}} <- lists:enumerate(Rows)]),
                 length(Rows), 1}
        end,
    #{first => First1, count => Count,
      name => case Csv of none -> split_name(maps:get(name, U)); _ -> csv end,
      password => case Csv of none -> pattern(maps:get(password, U)); _ -> csv end,
      csv => Csv, csv_index => Index,
      half => case Rule of
                  none -> 0;
                  neighbours -> min(CC div 2, (Count - 1) div 2)
              end}.

%% @doc Rows of a `username,password' CSV file (blank lines and lines
%% starting with # are skipped). Throws {usage, Message} on a bad file.
-spec read_csv(file:filename()) -> [{binary(), binary()}].
read_csv(File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            Lines = [string:trim(L) || L <- binary:split(Bin, [<<"\n">>, <<"\r\n">>], [global])],
            Rows = [begin
                        case binary:split(L, <<",">>) of
                            [N, P] when N =/= <<>> -> {string:trim(N), string:trim(P)};
                            _ -> throw({usage, io_lib:format("~ts line ~b: expected "
                                                             "username,password", [File, I])})
                        end
                    end || {I, L} <- lists:enumerate(Lines), L =/= <<>>,
                           binary:first(L) =/= $#],
            Rows =/= [] orelse throw({usage, io_lib:format("~ts: no users in the file", [File])}),
            Rows;
        {error, R} ->
            throw({usage, io_lib:format("cannot read ~ts: ~ts", [File, file:format_error(R)])})
    end.

split_name(Pattern) ->
    case binary:split(Pattern, <<"%N">>) of
        [Pre, Post] -> {Pre, Post};
        [_] -> throw({usage, io_lib:format("users.name \"~ts\" must contain %N", [Pattern])})
    end.

pattern(P) ->
    lists:join(n, binary:split(P, <<"%N">>, [global])).

%% @doc The user name (local part of the JID) of user N.
-spec name(users(), non_neg_integer()) -> binary().
name(#{name := csv, csv := Csv}, N) -> element(1, element(N, Csv));
name(#{name := {Pre, Post}}, N) -> <<Pre/binary, (integer_to_binary(N))/binary, Post/binary>>.

%% @doc The password of user N.
-spec password(users(), non_neg_integer()) -> binary().
password(#{password := csv, csv := Csv}, N) -> element(2, element(N, Csv));
password(#{password := Parts}, N) ->
    NB = integer_to_binary(N),
    iolist_to_binary([case P of n -> NB; _ -> P end || P <- Parts]).

%% @doc The number of the user with this name, or undefined.
-spec number_of(users(), binary()) -> non_neg_integer() | undefined.
number_of(#{name := csv, csv_index := Index}, Name) -> maps:get(Name, Index, undefined);
number_of(#{name := {Pre, Post}}, Name) ->
    PreL = byte_size(Pre), PostL = byte_size(Post),
    case Name of
        <<Pre:PreL/binary, Rest/binary>> when byte_size(Rest) > PostL ->
            case Rest of
                <<Digits:(byte_size(Rest) - PostL)/binary, Post:PostL/binary>> ->
                    try binary_to_integer(Digits) catch error:badarg -> undefined end;
                _ -> undefined
            end;
        _ -> undefined
    end.

%% @doc The contacts (user numbers) of user N.
-spec contacts(users(), non_neg_integer()) -> [non_neg_integer()].
contacts(#{half := 0}, _N) -> [];
contacts(#{first := F, count := C, half := H}, N) ->
    I = N - F,
    [F + ((I + D) rem C + C) rem C || D <- lists:seq(-H, -1) ++ lists:seq(1, H)].
