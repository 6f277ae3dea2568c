(* T3 for the network's own loss: from the forward pass to D and D⁺.

   For a network  plug C (Layer W_l b_l N)  (T02: any depth, any widths, biases, a positively
   k-homogeneous σ), a finite dataset (X s)_{s<m} and any per-sample loss ell s, the empirical loss
       L(θ) = Σ_s ell s (eval σ N_θ (X s))
   is taken as a function of one block of layer l (its weight W_l, vectorised, or its bias b_l),
   the rest of θ fixed.  Its gradient and Hessian are T01_analytic's `grad` and `hess`
   (mathcomp-analysis' `derive`, coordinate directional derivatives).  Under T2's layer map
   θ' = (c W_l, c b_l, c^{-k} W_{l+1}), c > 0, the block-l quantities at θ' satisfy
       g' = c⁻¹ g,  H' = c⁻² H,  ‖g'‖² = c⁻² ‖g‖²,  RQ' = c⁻² RQ,  D' = D,  D⁺' = D⁺.

   NO differentiability hypothesis is needed: the identities hold as equalities of the limits
   that define `derive` (`derive_scale_dir`, `derive_scale_fun`): when the difference quotient of
   one side converges, so does the other's, to the scaled limit; when it diverges, both limits are
   mathcomp-analysis' default value 0.  At a point where L is differentiable (and its partials
   are), `grad`/`hess` are the true gradient and Hessian, so the law holds for them there; the
   pinned deep-linear instance (T03_network_instance.v) shows such a point with g <> 0. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
From CoupledCurvature Require Import DefsAnalytic T01_analytic T02_homogeneous_rescaling.
From CoupledCurvature Require Import T03_c_minus_two_law T07_pseudo_inverse.

(* T3's conclusions for a block w of L moved to a *: w (L' the loss after the move): with
   g, H the gradient and Hessian of L at w and g', H' those of L' at a *: w,
     g' = a⁻¹ g,  H' = a⁻² H,  ‖g'‖² = a⁻² ‖g‖²,  RQ' = a⁻² RQ,  w'ᵀH'w' = wᵀHw,  w'ᵀg' = wᵀg,
     D' = D,  D⁺' = D⁺;
   only parsing, so that the pinned statements print them in full (w%R: w is read in ring_scope
   at every use; exported for the instances) *)
Notation T3_law L L' w a :=
  (let g := grad L w%R in let H := hess L w%R in
   let g' := grad L' (a *: w) in let H' := hess L' (a *: w) in
   [/\ g' = a^-1 *: g, H' = a ^- 2 *: H,
       sqnorm g' = a ^- 2 * sqnorm g, RQ H' (a *: w) = a ^- 2 * RQ H w &
       [/\ quad H' (a *: w) = quad H w, dot (a *: w) g' = dot w g,
           coupledD (a *: w) g' H' = coupledD w g H &
           coupledDplus (a *: w) g' H' = coupledDplus w g H]]) (only parsing).

Section Limits.
Variable R : realType.

(* lim (k·f) = k · lim f for k <> 0, whether or not f converges *)
Lemma lim_mulr (F : set (set R^o)) (k : R) : ProperFilter F -> k != 0 ->
  lim ((fun x : R^o => (k * x : R^o)) @ F) = k * lim F.
Proof.
move=> PF k0.
have H := @norm_hausdorff _ [pseudoMetricNormedZmodType R of R^o].
have [cF|dF] := pselect (cvg F).
  by apply: (cvg_lim H); exact: cvgMr.
rewrite (dvgP _ dF).
have dK : ~ cvg ((fun x : R^o => (k * x : R^o)) @ F).
  move=> cK; apply: dF; apply/cvg_ex.
  exists (k^-1 * lim ((fun x : R^o => (k * x : R^o)) @ F) : R^o).
  set l := lim _ in cK.
  have C : (fun x : R^o => (k^-1 * (k * x) : R^o)) @ F --> (k^-1 * l : R^o).
    exact: (cvgMr (a := k^-1) cK).
  have E : (fun x : R^o => (k^-1 * (k * x) : R^o)) = id.
    by apply/funext => x; rewrite mulrA mulVf // mul1r.
  by rewrite E in C.
by rewrite (dvgP _ dK) mulr0.
Qed.

(* h |-> c h maps the punctured neighbourhoods of 0 onto themselves (c <> 0) *)
Lemma dnbhs0_scale (c : R) : c != 0 ->
  (fun h : R^o => (c * h : R^o)) @ (0 : R^o)^' --> (0 : R^o)^'.
Proof.
move=> c0 P P0.
have C := @mulrl_continuous _ c (0 : R^o).
rewrite mulr0 in C.
have H := C _ P0.
have H2 : nbhs (0 : R^o) (fun x : R^o => c * x != 0 -> P (c * x)) by exact: H.
rewrite /= /within /=.
apply: (@filterS _ (nbhs (0 : R^o))) H2 => x /= Px x0.
by apply: Px; rewrite mulf_neq0.
Qed.

Lemma dnbhs0_scaleE (c : R) : c != 0 ->
  (fun h : R^o => (c * h : R^o)) @ (0 : R^o)^' = (0 : R^o)^'.
Proof.
move=> c0; apply/funext => P; apply/propext; split; last exact: dnbhs0_scale.
move=> /= HP; have ci0 : c^-1 != 0 by rewrite invr_eq0.
have E : P = (fun h : R^o => (c^-1 * h : R^o)) @^-1` ((fun h : R^o => (c * h : R^o)) @^-1` P).
  by apply/funext => y /=; rewrite mulrA mulfV // mul1r.
by rewrite E; exact: (dnbhs0_scale ci0 HP).
Qed.

Variable U : normedModType R.

(* the directional derivative is homogeneous in the direction: no differentiability needed *)
Lemma derive_scale_dir (f : U -> R^o) (x v : U) (c : R) : c != 0 ->
  derive f x (c *: v) = c * derive f x v.
Proof.
move=> c0; rewrite /derive.
set q := fun h : R => h^-1 *: ((f \o shift x) (h *: v) - f x).
have -> : (fun h : R => h^-1 *: ((f \o shift x) (h *: (c *: v)) - f x))
        = (fun h : R => c * q (c * h)).
  apply/funext => h; rewrite /q /= scalerA [h * c]mulrC !regular_scaleE.
  by rewrite invfM mulrA mulrA mulfV // mul1r.
change (lim ((fun y : R^o => (c * y : R^o)) @ (q @ ((fun h : R^o => (c * h : R^o)) @ (0 : R^o)^')))
        = c * lim (q @ (0 : R^o)^')).
by rewrite dnbhs0_scaleE // lim_mulr.
Qed.

(* ... and the derivative of k·f is k times that of f: no differentiability needed *)
Lemma derive_scale_fun (f : U -> R^o) (x v : U) (k : R) : k != 0 ->
  derive (fun y => (k * f y : R^o)) x v = k * derive f x v.
Proof.
move=> k0; rewrite /derive.
set q := fun h : R => h^-1 *: ((f \o shift x) (h *: v) - f x).
have -> : (fun h : R => h^-1 *: (((fun y => (k * f y : R^o)) \o shift x) (h *: v) - k * f x))
        = (fun h : R => k * q h).
  by apply/funext => h; rewrite /q /= !regular_scaleE -mulrBr mulrCA.
change (lim ((fun y : R^o => (k * y : R^o)) @ (q @ (0 : R^o)^')) = k * lim (q @ (0 : R^o)^')).
by rewrite lim_mulr.
Qed.

End Limits.

Section RescaledBlock.
Variable R : realType.
Variable n : nat.
Local Notation V := (matrix_normedModType R n 0).

Lemma mulV_scalar (c : R) (x : V) : mulV c%:M x = c *: x.
Proof. by rewrite /mulV mul_scalar_mx. Qed.

(* if F'(c v) = k F(v) for every v, the directional derivatives obey
   d1 F' u (c y) = c⁻¹ k d1 F u y, for every L, with no differentiability *)
Lemma d1_rescale (F F' : V -> R^o) (c k : R) : c != 0 -> k != 0 ->
  (forall v, F' (c *: v) = k * F v) ->
  forall u y, d1 F' u (c *: y) = c^-1 * k * d1 F u y.
Proof.
move=> c0 k0 FF u y.
have E : (fun v : V => (k * F v : R^o)) = F' \o mulV c%:M.
  by apply/funext => v /=; rewrite mulV_scalar FF.
have := derive_comp_linear c%:M F' y u; rewrite -E !mulV_scalar /d1.
rewrite derive_scale_fun // derive_scale_dir // => E2.
by rewrite -mulrA E2 mulrA mulVf // mul1r.
Qed.

(* the gradient and Hessian of F' at c v, for F'(c v) = F(v) and c <> 0 *)
Section Rescaled.
Variables (F F' : V -> R^o) (c : R).
Hypotheses (c0 : c != 0) (FF : forall v, F' (c *: v) = F v).

Lemma grad_rescale w : grad F' (c *: w) = c^-1 *: grad F w.
Proof.
apply/matrixP => i j; rewrite !mxE.
by rewrite (@d1_rescale F F' c 1) ?oner_neq0 ?mulr1 // => v; rewrite mul1r.
Qed.

Lemma hess_rescale w : hess F' (c *: w) = c ^- 2 *: hess F w.
Proof.
apply/matrixP => i j; rewrite !mxE /d2.
have G v : d1 F' (e j) (c *: v) = c^-1 * d1 F (e j) v.
  by have := congr1 (fun M : 'cV[R]_n.+1 => M j 0) (grad_rescale v); rewrite !mxE.
have ci0 : c^-1 != 0 by rewrite invr_eq0.
have := @d1_rescale (fun y => d1 F (e j) y) (fun y => d1 F' (e j) y) c c^-1 c0 ci0 G (e i) w.
by rewrite /d1 => ->; rewrite -exprVn expr2.
Qed.

End Rescaled.

(* the rescaled block, for any F, F' with F'(c v) = F v (c > 0): T3's conclusions for the true
   derivatives grad and hess, no differentiability needed *)
Theorem T3_rescaled_block (F F' : V -> R^o) (c : R) (w : V) : 0 < c ->
  (forall v, F' (c *: v) = F v) ->
  T3_law F F' w c.
Proof.
move=> c0 FF g H g' H'; have cn0 := lt0r_neq0 c0.
have Eg : g' = act_g c%:M g by rewrite act_g_scalar /g' (grad_rescale cn0 FF).
have EH : H' = act_H c%:M H by rewrite act_H_scalar /H' (hess_rescale cn0 FF).
have Ew : c *: w = act_w c%:M w by rewrite act_w_scalar.
have [s1 s2 s3 s4] := T3_scalar_block w g H cn0.
have [d1 d2] := T3_scalar_block_D w g H cn0.
split.
- by rewrite Eg act_g_scalar.
- by rewrite EH act_H_scalar.
- by rewrite Eg.
- by rewrite EH Ew.
- by split; rewrite ?Eg ?EH Ew.
Qed.

End RescaledBlock.

Section NetworkLoss.
Variable R : realType.
Variable sigma : R -> R.
Variable k : nat.

(* the empirical loss of a network on a dataset (X s)_{s<m}, with per-sample losses ell s
   (ell s z = ℓ(z, y_s) for a target y_s, or anything else) *)
Definition emp_loss i o (N : net R i o) (m : nat) (X : 'I_m -> 'cV[R]_i)
  (ell : 'I_m -> 'cV[R]_o -> R) : R := \sum_(s < m) ell s (eval sigma N (X s)).

(* the weight block W_l of size h.+1 × i.+1, vectorised as a column of size h.+1 * i.+1 *)
Definition wvec h i := matrix_normedModType R (i + h * i.+1) 0.
Definition unvec h i (v : wvec h i) : 'M[R]_(h.+1, i.+1) := @vec_mx R h.+1 i.+1 v^T.
Definition vec h i (W : 'M[R]_(h.+1, i.+1)) : wvec h i := (mxvec W)^T : 'cV_(h.+1 * i.+1).

Lemma vecK h i (W : 'M[R]_(h.+1, i.+1)) : unvec (vec W) = W.
Proof. by rewrite /unvec /vec trmxK mxvecK. Qed.

Lemma unvecZ h i (c : R) (v : wvec h i) : unvec (c *: v) = c *: unvec v.
Proof. by rewrite /unvec linearZ /= linearZ. Qed.

Hypothesis sigma_hom : forall c z : R, 0 < c -> sigma (c * z) = c ^+ k * sigma z.

(* T3's conclusions for the block W_{l+1} = W2 under T2's layer map with factor c on layer l:
   the block moves by a = c^{-k} *)
Local Notation T3_law_next L L' W2 c :=
  (let a := c ^- k in let w := vec W2 in T3_law L L' w a) (only parsing).

(* T3 end to end, weight block W_l: any context C (layers 1..l-1), any W_l, b_l, any rest N of
   the network (its first weight is W_{l+1}), any data and per-sample losses, any c > 0 *)
Theorem T3_network_W j i h o (C : ctx R j i.+1) (W : 'M[R]_(h.+1, i.+1)) (b : 'cV[R]_h.+1)
  (N : net R h.+1 o) (m : nat) (X : 'I_m -> 'cV[R]_j) (ell : 'I_m -> 'cV[R]_o -> R) (c : R) :
  0 < c ->
  let L := fun v : wvec h i =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer (unvec v) b N)) (X s)) : R^o) in
  let L' := fun v : wvec h i =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer (unvec v) (c *: b)
                                       (rmul_first ((c ^+ k)^-1)%:M N))) (X s)) : R^o) in
  let w := vec W in
  T3_law L L' w c.
Proof.
move=> c0 L L' w; apply: T3_rescaled_block => // v.
rewrite /L /L' unvecZ; apply: eq_bigr => s _.
by rewrite (layer_rescaling_preserves_output sigma_hom).
Qed.

(* T3 end to end, bias block b_l *)
Theorem T3_network_b j i h o (C : ctx R j i) (W : 'M[R]_(h.+1, i)) (b : 'cV[R]_h.+1)
  (N : net R h.+1 o) (m : nat) (X : 'I_m -> 'cV[R]_j) (ell : 'I_m -> 'cV[R]_o -> R) (c : R) :
  0 < c ->
  let L := fun v : matrix_normedModType R h 0 =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer W v N)) (X s)) : R^o) in
  let L' := fun v : matrix_normedModType R h 0 =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer (c *: W) v
                                       (rmul_first ((c ^+ k)^-1)%:M N))) (X s)) : R^o) in
  T3_law L L' b c.
Proof.
move=> c0 L L'; apply: T3_rescaled_block => // v.
rewrite /L /L'; apply: eq_bigr => s _.
by rewrite (layer_rescaling_preserves_output sigma_hom).
Qed.

(* the step shared by T3_network_next and T3_network_next_out: the block W_{l+1}, as a column v,
   enters the rest of the network through mk v (a hidden layer or the output layer), and moving it
   by a is rmul_first by a%:M; under T2's layer map (a = c^{-k}) the losses agree *)
Lemma T3_next_block j i h h2 o (C : ctx R j i) (W : 'M[R]_(h.+1, i)) (b : 'cV[R]_h.+1)
  (mk : wvec h2 h -> net R h.+1 o) (w : wvec h2 h)
  (m : nat) (X : 'I_m -> 'cV[R]_j) (ell : 'I_m -> 'cV[R]_o -> R) (c : R) :
  0 < c -> (forall (a : R) v, mk (a *: v) = rmul_first a%:M (mk v)) ->
  let L := fun v => (\sum_(s < m) ell s (eval sigma (plug C (Layer W b (mk v))) (X s)) : R^o) in
  let L' := fun v => (\sum_(s < m) ell s (eval sigma (plug C (Layer (c *: W) (c *: b) (mk v))) (X s)) : R^o) in
  T3_law L L' w (c ^- k).
Proof.
move=> c0 mkZ L L'; apply: T3_rescaled_block => [|v]; first by rewrite invr_gt0 exprn_gt0.
rewrite /L /L' mkZ; apply: eq_bigr => s _.
by rewrite (layer_rescaling_preserves_output sigma_hom).
Qed.

(* T3 end to end, weight block W_{l+1} when layer l+1 is hidden: under the same layer map the
   block moves as W_{l+1} -> c^{-k} W_{l+1}, so g' = c^k g and H' = c^{2k} H (written with the
   block factor a = c^{-k}: g' = a⁻¹ g, H' = a⁻² H), and D, D⁺ are unchanged *)
Theorem T3_network_next j i h h2 o (C : ctx R j i) (W : 'M[R]_(h.+1, i)) (b : 'cV[R]_h.+1)
  (W2 : 'M[R]_(h2.+1, h.+1)) (b2 : 'cV[R]_h2.+1) (N2 : net R h2.+1 o)
  (m : nat) (X : 'I_m -> 'cV[R]_j) (ell : 'I_m -> 'cV[R]_o -> R) (c : R) :
  0 < c ->
  let L := fun v : wvec h2 h =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer W b (Layer (unvec v) b2 N2))) (X s)) : R^o) in
  let L' := fun v : wvec h2 h =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer (c *: W) (c *: b)
                                               (Layer (unvec v) b2 N2))) (X s)) : R^o) in
  T3_law_next L L' W2 c.
Proof.
move=> c0; pose mk (v : wvec h2 h) := Layer (unvec v) b2 N2.
have mkZ (a : R) v : mk (a *: v) = rmul_first a%:M (mk v) by rewrite /mk /= unvecZ mul_mx_scalar.
exact: (@T3_next_block _ _ _ _ _ C W b mk (vec W2) _ X ell c c0 mkZ).
Qed.

(* ... and when layer l+1 is the output layer *)
Theorem T3_network_next_out j i h o (C : ctx R j i) (W : 'M[R]_(h.+1, i)) (b : 'cV[R]_h.+1)
  (W2 : 'M[R]_(o.+1, h.+1)) (b2 : 'cV[R]_o.+1)
  (m : nat) (X : 'I_m -> 'cV[R]_j) (ell : 'I_m -> 'cV[R]_o.+1 -> R) (c : R) :
  0 < c ->
  let L := fun v : wvec o h =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer W b (Out (unvec v) b2))) (X s)) : R^o) in
  let L' := fun v : wvec o h =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer (c *: W) (c *: b) (Out (unvec v) b2))) (X s)) : R^o) in
  T3_law_next L L' W2 c.
Proof.
move=> c0; pose mk (v : wvec o h) := Out (unvec v) b2.
have mkZ (a : R) v : mk (a *: v) = rmul_first a%:M (mk v) by rewrite /mk /= unvecZ mul_mx_scalar.
exact: (@T3_next_block _ _ _ _ _ C W b mk (vec W2) _ X ell c c0 mkZ).
Qed.

End NetworkLoss.
