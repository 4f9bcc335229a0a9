%% @doc Logging set-up: the configured level, and a file handler writing
%% one event per line (structured reports as key=value) to log_file.
-module(throng_log).

-export([setup/0]).

-spec setup() -> ok | {error, term()}.
setup() ->
    Level = throng_config:get([loglevel]),
    ok = logger:set_primary_config(level, Level),
    File = throng_paths:log_file(),
    ok = filelib:ensure_dir(File),
    _ = logger:remove_handler(throng_file),
    Formatter = {logger_formatter, #{single_line => true, max_size => 4096,
                                     template => [time, " ", level, " ", msg, "\n"]}},
    case logger:add_handler(throng_file, logger_std_h,
                            #{level => Level, formatter => Formatter,
                              config => #{file => File, max_no_bytes => 50000000,
                                          max_no_files => 5}}) of
        ok -> ok;
        {error, Why} -> {error, {log_file, File, Why}}
    end.
