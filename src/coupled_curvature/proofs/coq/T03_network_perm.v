(* T3 for a permutation of the hidden units of layer l, end to end for the network's own loss.

   For a network  plug C (Layer W_l b_l N)  (T02: any depth, any widths, biases, ANY σ), a finite
   dataset and any per-sample loss, permuting layer l's units by p,
       W_l -> P W_l,   b_l -> P b_l,   W_{l+1} -> W_{l+1} Pᵀ      (P = perm_mx p),
   preserves the output (T02 permutation_preserves_output).  On the block W_l (vectorised) the map
   is w -> Q w with Q = vec_action (perm_map p 1) (T05: the matrix of W |-> P W on vec W), on the
   block b_l it is b -> P b; both are permutations of the coordinates.  At θ and at the permuted θ'
   the block-l quantities satisfy
       g' = Q g,  H' = Q H Qᵀ,  ‖g'‖² = ‖g‖²,  RQ' = RQ,  w'ᵀH'w' = wᵀHw,  w'ᵀg' = wᵀg,
       D' = D,  D⁺' = D⁺.
   As for the rescaling (T03_network_law), NO differentiability hypothesis is needed: a coordinate
   permutation sends basis directions to basis directions, so each partial derivative of L' at
   Q w is a partial derivative of L at w, as an equality of the limits that define `derive`
   (derive_comp_linear, derive2_comp_linear).  T3_network_perm_instance: a 1-2-1 linear net
   x |-> W2 (W x + b) and its bias block b, whose swapped copy has other parameters (the
   permutation moves b). *)
From mathcomp Require Import all_ssreflect fingroup perm all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
From mathcomp Require Import ring.
From CoupledCurvature Require Import DefsAnalytic T01_analytic T02_homogeneous_rescaling.
From CoupledCurvature Require Import Common T01_transformation_law T04_invariance_group T07_pseudo_inverse T03_c_minus_two_law.
From CoupledCurvature Require Import T05_relu_group T03_network_law.

(* T3's conclusions for a block w of L moved to Q w by a coordinate permutation Q (L' the loss
   after the move): g' = Q g, H' = Q H Qᵀ, ‖g'‖² = ‖g‖², RQ' = RQ, w'ᵀH'w' = wᵀHw, w'ᵀg' = wᵀg,
   D' = D, D⁺' = D⁺; only parsing, so that the pinned statements print them in full *)
Local Notation T3_perm_law L L' w Q :=
  (let g := grad L w%R in let H := hess L w%R in
   let g' := grad L' (Q *m w) in let H' := hess L' (Q *m w) in
   [/\ g' = Q *m g, H' = Q *m H *m Q^T,
       sqnorm g' = sqnorm g, RQ H' (Q *m w) = RQ H w &
       [/\ quad H' (Q *m w) = quad H w, dot (Q *m w) g' = dot w g,
           coupledD (Q *m w) g' H' = coupledD w g H &
           coupledDplus (Q *m w) g' H' = coupledDplus w g H]]) (only parsing).

Section PermutedBlock.
Variable R : realType.
Variable n : nat.
Local Notation V := (matrix_normedModType R n 0).

Lemma mul_entry (A : 'M[R]_n.+1) (x : 'cV[R]_n.+1) i : (A *m x) i 0 = dot (A^T *m e i) x.
Proof. by rewrite dot_mulmx trmxK dot_e_l. Qed.

Lemma conj_entry (A M : 'M[R]_n.+1) i j :
  (A *m M *m A^T) i j = dot (A^T *m e i) (M *m (A^T *m e j)).
Proof. by rewrite dot_mulmx trmxK !mulmxA dot_e_mxE. Qed.

Section Permuted.
Variables (F F' : V -> R^o) (Q : 'M[R]_n.+1).
(* Q is orthogonal and sends every basis vector to a basis vector: a coordinate permutation *)
Hypotheses (QQ : Q^T *m Q = 1%:M) (Qe : forall i, exists j, Q^T *m e i = e j).
Hypothesis FF : forall v, F' (Q *m v) = F v.

Lemma perm_basis i j : Q^T *m e i = e j -> e i = mulV Q (e j).
Proof. by move=> <-; rewrite /mulV mulmxA (mulmx1C QQ) mul1mx. Qed.

Lemma comp_perm : F' \o mulV Q = F.
Proof. by apply/funext => v; exact: FF. Qed.

Lemma grad_perm w : grad F' (Q *m w) = Q *m grad F w.
Proof.
apply/matrixP => i b; rewrite ord1 [LHS]mxE mul_entry.
have [a Ha] := Qe i; rewrite Ha dot_e_l mxE (perm_basis Ha).
by change (d1 F' (mulV Q (e a)) (mulV Q w) = d1 F (e a) w); rewrite -derive_comp_linear comp_perm.
Qed.

Lemma hess_perm w : hess F' (Q *m w) = Q *m hess F w *m Q^T.
Proof.
apply/matrixP => i j; rewrite [LHS]mxE conj_entry.
have [a Ha] := Qe i; have [b Hb] := Qe j; rewrite Ha Hb dot_e_mxE mxE.
rewrite (perm_basis Ha) (perm_basis Hb).
by change (d2 F' (mulV Q (e a)) (mulV Q (e b)) (mulV Q w) = d2 F (e a) (e b) w);
  rewrite -derive2_comp_linear comp_perm.
Qed.

End Permuted.

(* the permuted block, for any F, F' with F'(Q v) = F v and Q a coordinate permutation: T3's
   conclusions for the true derivatives grad and hess, no differentiability needed *)
Theorem T3_permuted_block (F F' : V -> R^o) (Q : 'M[R]_n.+1) (w : V) :
  Q^T *m Q = 1%:M -> (forall i, exists j, Q^T *m e i = e j) ->
  (forall v, F' (Q *m v) = F v) ->
  T3_perm_law F F' w Q.
Proof.
move=> QQ Qe FF g H g' H'.
have cQ : conformal Q by exists 1; rewrite ltr01 expr1n.
have Qu := conformal_unit cQ.
have iQ : invmx Q = Q^T by rewrite -[LHS]mul1mx -QQ -mulmxA mulmxV // mulmx1.
have Eg : g' = act_g Q g by rewrite /act_g iQ trmxK /g' (grad_perm QQ Qe FF).
have EH : H' = act_H Q H by rewrite /act_H iQ trmxK /H' (hess_perm QQ Qe FF).
have Ew : Q *m w = act_w Q w by [].
have sq (x : 'cV[R]_n.+1) : sqnorm (Q *m x) = sqnorm x.
  by rewrite /sqnorm dot_mulmx mulmxA QQ mul1mx.
split.
- by rewrite /g' (grad_perm QQ Qe FF).
- by rewrite /H' (hess_perm QQ Qe FF).
- by rewrite /g' (grad_perm QQ Qe FF) sq.
- by rewrite /RQ sq EH Ew quad_act.
- split; rewrite ?Eg ?EH Ew.
  + exact: quad_act.
  + exact: dot_act.
  + exact: coupledD_conformal.
  + exact: T7_Dplus_invariant.
Qed.

End PermutedBlock.

Section NetworkPerm.
Variable R : realType.
Variable sigma : R -> R.

Lemma perm_map_is_linear h i (p : 'S_h) (t : 'S_i) : linear (@perm_map R h i p t).
Proof. by move=> a A B; rewrite /perm_map mulmxDr mulmxDl -scalemxAr -scalemxAl. Qed.
Canonical perm_map_linear h i p t := Linear (@perm_map_is_linear h i p t).

(* the vec matrix of W |-> P_p W P_tᵀ is a coordinate permutation that moves vec W to vec (P_p W P_tᵀ) *)
Lemma vec_perm_action h i (p : 'S_h.+1) (t : 'S_i.+1) :
  let Q := vec_action (perm_map p t) in
  [/\ Q^T *m Q = 1%:M, (forall q, exists q', Q^T *m e q = e q') &
      forall W, Q *m vec W = vec (@perm_map R _ _ p t W)].
Proof.
move=> Q; split.
- exact: permutation_W_orthogonal.
- case/mxvec_indexP => r u; exists (mxvec_index (p r) (t u)).
  apply/matrixP => x y; rewrite ord1 /Q /vec_action trmxK -colE [LHS]mxE [RHS]mxE lin_mx_perm_map.
  by rewrite eqxx andbT.
- by move=> W; rewrite /Q /vec_action /vec -trmx_mul mul_vec_lin.
Qed.

Lemma perm_mx_basis h (p : 'S_h.+1) q : (perm_mx p)^T *m e q = e (p q) :> 'cV[R]_h.+1.
Proof.
apply/matrixP => x y; rewrite tr_perm_mx -row_permE !mxE.
by rewrite -(inj_eq (@perm_inj _ p)) permKV.
Qed.

Lemma vec_unvec h i (v : wvec R h i) : vec (unvec v) = v.
Proof. by rewrite /vec /unvec vec_mxK trmxK. Qed.

(* T3 end to end for a permutation p of layer l's units, weight block W_l: any context C, any
   W_l, b_l, any rest N (its first weight W_{l+1} has its columns permuted), any data and
   per-sample losses, any σ *)
Theorem T3_network_perm_W j i h o (C : ctx R j i.+1) (W : 'M[R]_(h.+1, i.+1)) (b : 'cV[R]_h.+1)
  (N : net R h.+1 o) (m : nat) (X : 'I_m -> 'cV[R]_j) (ell : 'I_m -> 'cV[R]_o -> R)
  (p : 'S_h.+1) :
  let L := fun v : wvec R h i =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer (unvec v) b N)) (X s)) : R^o) in
  let L' := fun v : wvec R h i =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer (unvec v) (perm_mx p *m b)
                                       (rmul_first (perm_mx p)^T N))) (X s)) : R^o) in
  let Q := vec_action (fun M : 'M[R]_(h.+1, i.+1) => perm_mx p *m M) in
  let w := vec W in
  Q *m w = vec (perm_mx p *m W) /\ T3_perm_law L L' w Q.
Proof.
move=> L L' Q w.
have P1 (M : 'M[R]_(h.+1, i.+1)) : perm_map p 1 M = perm_mx p *m M.
  by rewrite /perm_map perm_mx1 trmx1 mulmx1.
have -> : Q = vec_action (perm_map p 1) by rewrite /Q; congr vec_action; apply/funext => M; rewrite P1.
have [QQ Qe QW] := vec_perm_action p (1%g : 'S_i.+1).
split; first by rewrite /w QW P1.
apply: T3_permuted_block => // v.
rewrite /L /L' -{1}(vec_unvec v) QW vecK P1; apply: eq_bigr => s _.
by rewrite permutation_preserves_output.
Qed.

(* ... and bias block b_l (moved by P itself) *)
Theorem T3_network_perm_b j i h o (C : ctx R j i) (W : 'M[R]_(h.+1, i)) (b : 'cV[R]_h.+1)
  (N : net R h.+1 o) (m : nat) (X : 'I_m -> 'cV[R]_j) (ell : 'I_m -> 'cV[R]_o -> R)
  (p : 'S_h.+1) :
  let L := fun v : matrix_normedModType R h 0 =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer W v N)) (X s)) : R^o) in
  let L' := fun v : matrix_normedModType R h 0 =>
    (\sum_(s < m) ell s (eval sigma (plug C (Layer (perm_mx p *m W) v
                                       (rmul_first (perm_mx p)^T N))) (X s)) : R^o) in
  T3_perm_law L L' b (perm_mx p).
Proof.
move=> L L'; apply: T3_permuted_block => [|q|v]; first exact: permutation_b_orthogonal.
  by exists (p q); exact: perm_mx_basis.
rewrite /L /L'; apply: eq_bigr => s _; by rewrite permutation_preserves_output.
Qed.

End NetworkPerm.

(* The instance: a 1-2-1 linear network x |-> W2 (W x + b) with W = 0, W2 = (1 2), squared loss
   against the target 0 on the one sample x = 1, block b at b = e_0 = (1, 0), and the swap p of
   the two hidden units.  There L(v) = (v₀ + 2v₁)², L is differentiable near b and its partials
   are differentiable at b (grad and hess are the true derivatives), g = (2, 4) <> 0, the swap
   moves the point (P b = (0, 1) <> b), and at the permuted point the gradient of the permuted
   network's loss is P g = (4, 2) = 2 (W2 Pᵀ)ᵀ. *)
Section PermInstance.
Variable R : realType.
Local Notation V := (matrix_normedModType R 1 0).
Local Notation W2 := (\row_(k < 2) (k.+1)%:R : 'M[R]_(1, 2)).

Definition pl (v : V) : R^o := (W2 *m v) 0 0.

Lemma pl_lin (x u : V) (h : R) : pl (h *: u + x) = h * pl u + pl x.
Proof. by rewrite /pl mulmxDr -scalemxAr [LHS]mxE [X in X + _]mxE. Qed.

Lemma derive_pl (x u : V) : derive pl x u = pl u.
Proof.
rewrite /derive /=; apply: (lim_near_cst (@norm_hausdorff _ [pseudoMetricNormedZmodType R of R^o])).
move: (near_neq0 R); apply: filterS => h h0.
by rewrite /= pl_lin addrK regular_scaleE mulrA mulVf // mul1r.
Qed.

Lemma diff_pl (x : V) : differentiable pl x.
Proof.
have -> : pl = \sum_(k < 2) (W2 0 k \*: (fun v : V => (v k 0 : R^o))).
  by apply/funext => v; rewrite /pl fct_sumE mxE.
by apply: differentiable_sum => k; apply: differentiableZ; exact: differentiable_coord.
Qed.

Lemma pl_e (i : 'I_2) : pl (e i) = W2 0 i.
Proof. by rewrite /pl /e -colE mxE. Qed.

Definition ploss (v : V) : R^o :=
  \sum_(s < 1) ((eval id (plug (Hole R 1) (Layer (0 : 'M[R]_(2, 1)) v (Out W2 0)))
                     (1%:M : 'cV[R]_1)) 0 0) ^+ 2.

Lemma plossE : ploss = pl * pl.
Proof.
apply/funext => v; rewrite /ploss big_ord1 /= map_mx_id // mul0mx add0r addr0 expr2.
by [].
Qed.

Lemma d1_ploss (i : 'I_2) : (fun y : V => (d1 ploss (e i) y : R^o)) = (2%:R * W2 0 i) \*: pl.
Proof.
apply/funext => y; rewrite /d1 plossE deriveM ?derive_pl; try exact/diff_derivable/diff_pl.
rewrite !regular_scaleE pl_e.
change (pl y * W2 0 i + pl y * W2 0 i = 2%:R * W2 0 i * pl y).
set a := (_ 0 i); set q := pl y.
by rewrite -mulr2n -mulr_natr; ring.
Qed.

Theorem T3_network_perm_instance :
  let p := tperm (0 : 'I_2) 1 in
  let L := fun v : V =>
    (\sum_(s < 1) ((eval id (plug (Hole R 1) (Layer (0 : 'M[R]_(2, 1)) v (Out W2 0)))
                        (1%:M : 'cV[R]_1)) 0 0) ^+ 2 : R^o) in
  let L' := fun v : V =>
    (\sum_(s < 1) ((eval id (plug (Hole R 1) (Layer (perm_mx p *m (0 : 'M[R]_(2, 1))) v
                                                (rmul_first (perm_mx p)^T (Out W2 0))))
                        (1%:M : 'cV[R]_1)) 0 0) ^+ 2 : R^o) in
  let b : V := e (0 : 'I_2) in
  [/\ differentiable_near L b,
      (forall j, differentiable (fun y => (d1 L (e j) y : R^o)) b),
      grad L b = 2%:R *: W2^T,
      perm_mx p *m b != b &
      grad L' (perm_mx p *m b) = 2%:R *: (W2 *m (perm_mx p)^T)^T].
Proof.
move=> p L L' b; have EL : L = ploss by [].
have pb : pl b = 1 by rewrite pl_e mxE.
have G : grad L b = 2%:R *: W2^T.
  apply/matrixP => i y; rewrite ord1 EL [LHS]mxE.
  have := congr1 (fun f => f b) (d1_ploss i); rewrite /= => ->.
  by rewrite regular_scaleE pb mulr1 !mxE.
split => //.
- by rewrite /differentiable_near; near=> y; rewrite EL plossE; apply: differentiableM; exact: diff_pl.
- move=> j; rewrite EL d1_ploss; apply: differentiableZ; exact: diff_pl.
- apply/eqP => /matrixP /(_ 0 0); rewrite -row_permE !mxE tpermL eqxx /=.
  by move/eqP; rewrite eq_sym oner_eq0.
- have [-> _ _ _ _] := @T3_network_perm_b R id 1 1 1 1 (Hole R 1) 0 b (Out W2 0) 1
    (fun _ => 1%:M) (fun _ z => z 0 0 ^+ 2) p.
  by rewrite G -scalemxAr trmx_mul trmxK.
Unshelve. all: by end_near.
Qed.

End PermInstance.
